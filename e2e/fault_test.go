package e2e

import (
	"bufio"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/decreehq/decree/internal/testtool"
)

// faultRoutine records its start, leaves a setsid child writing
// timestamps to a ledger outside the project (the way a Jupyter kernel's
// children escape a process group), works for a while, changes the tree
// and records its end. Ledger lines: "START|TICK|END message attempt
// unix-ns [pid]".
const faultRoutine = `ledger="$FAULT_LEDGER"
now() { date +%s%N; }
echo "START $message_id $DECREE_ATTEMPT $(now) $$" >> "$ledger"
setsid bash -c 'while :; do echo "TICK '"$message_id $DECREE_ATTEMPT"' $(date +%s%N)" >> "'"$ledger"'"; sleep 0.01; done' &
sleep "0.$(( RANDOM % 5 + 2 ))"
name=$(grep -o 'm[0-9][0-9][0-9]' "$message_file" | head -n 1)
echo "$message_id" > "out-$name.txt"
echo "END $message_id $DECREE_ATTEMPT $(now)" >> "$ledger"`

// faultConfig keeps failures from dead-lettering most messages: a message
// may be hit by several faults.
const faultConfig = `commands:
  router: ""
max_retries: 6
default_routine: develop
`

// TestFencedAttemptsUnderFaults: a separate controller and two workers
// process a stream of messages while the test, at random points of
// running attempts, kills a worker with SIGKILL, stops one with SIGSTOP,
// or kills the controller with SIGKILL. Each routine leaves a detached
// (setsid) child writing timestamps. Afterwards: no attempt wrote anything
// after the next attempt of its message started, and every message is done
// or dead exactly once.
func TestFencedAttemptsUnderFaults(t *testing.T) {
	testtool.Require(t, "bash")
	testtool.Require(t, "setsid")
	const trials = 21
	p := newProject(t, binary, faultConfig)
	p.routine("develop", "", faultRoutine)
	ledger := filepath.Join(t.TempDir(), "ledger")
	t.Setenv("FAULT_LEDGER", ledger) // inherited by the workers, so by routines
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 11))
	t.Logf("seed time %s", time.Now().Format(time.RFC3339Nano))

	ctlArgs := []string{"--lease-ttl", "1s"}
	begin := time.Now()
	ctl := startController(t, p, ctlArgs...)
	workers := map[string]*testtool.Proc{}
	for _, id := range []string{"fw-a", "fw-b"} {
		workers[id] = startWorker(t, p, id)
	}
	var stopped []*testtool.Proc
	t.Cleanup(func() {
		for _, w := range stopped {
			w.Signal(syscall.SIGCONT)
		}
	})

	// Every message is queued before the controller starts: a file dropped
	// into the inbox while an attempt runs is taken for that attempt's
	// follow-up and discarded with it when the attempt fails (a pipeline
	// matter, reported separately).
	names := map[string]bool{}
	for i := range 45 {
		name := fmt.Sprintf("m%03d", i)
		names[name] = true
		p.write(".decree/inbox/"+name+".md", "work on "+name+"\n")
	}
	deadline := begin.Add(100 * time.Second)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("inbox %v\ndone %v\ndead %v", p.messages(".decree/inbox"), p.messages(".decree/inbox/done"), p.messages(".decree/inbox/dead"))
			ev, _ := os.ReadFile(p.path(".decree/events.jsonl"))
			if len(ev) > 6000 {
				ev = ev[len(ev)-6000:]
			}
			t.Logf("events (end):\n%s", ev)
			out, _ := exec.Command("bash", "-c", "cd "+p.dir+" && find . -path ./.decree/objects -prune -o -type f -print | sort | grep -v '/runs/.*/\\(routine\\|hook\\)' ; for f in .decree/runs/*/message.md; do echo \"$f: $(head -c 300 $f | tr '\\n' ' ')\"; done").CombinedOutput()
			t.Logf("files:\n%s", out)
		}
	})
	kinds := []string{"kill -9 worker", "SIGSTOP worker", "kill -9 controller"}
	done := 0
	for trial := 0; trial < trials; trial++ {
		// Wait for an attempt to run, then strike at a random point in it.
		pid := runningAttempt(ledger)
		for pid == 0 && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
			pid = runningAttempt(ledger)
		}
		if pid == 0 {
			t.Errorf("only %d of %d faults injected in %s: no attempt ran", done, trials, time.Since(begin).Round(time.Second))
			break
		}
		time.Sleep(time.Duration(rng.IntN(250)) * time.Millisecond)
		kind := kinds[trial%len(kinds)]
		switch kind {
		case "kill -9 worker", "SIGSTOP worker":
			id := workerOf(pid, workers)
			if id == "" {
				trial-- // the attempt ended meanwhile: try again
				continue
			}
			w := workers[id]
			if kind == "kill -9 worker" {
				w.Signal(syscall.SIGKILL)
				w.Wait(t, 10*time.Second)
				workers[id] = startWorker(t, p, id)
				break
			}
			w.Signal(syscall.SIGSTOP)
			stopped = append(stopped, w)
			pause := 1500*time.Millisecond + time.Duration(rng.IntN(1000))*time.Millisecond
			time.Sleep(pause)
			w.Signal(syscall.SIGCONT)
		case "kill -9 controller":
			ctl.Signal(syscall.SIGKILL)
			ctl.Wait(t, 10*time.Second)
			ctl = startController(t, p, ctlArgs...)
		}
		done++
		t.Logf("trial %d at %s: %s", trial+1, time.Since(begin).Round(time.Millisecond), kind)
	}
	// Wait for every message to be done or dead.
	t.Logf("faults done after %s; waiting for the rest", time.Since(begin).Round(time.Millisecond))
	for time.Now().Before(deadline.Add(20 * time.Second)) {
		if len(p.messages(".decree/inbox")) == 0 && runningAttempt(ledger) == 0 &&
			len(p.messages(".decree/inbox/done"))+len(p.messages(".decree/inbox/dead")) >= len(names) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	checkNoOverlap(t, ledger)
	seen := map[string]int{}
	for _, dir := range []string{".decree/inbox/done", ".decree/inbox/dead"} {
		for _, m := range p.messages(dir) {
			seen[strings.TrimSuffix(m, ".md")]++
		}
	}
	for name := range names {
		if seen[name] != 1 {
			t.Errorf("message %s is done or dead %d times, want exactly once", name, seen[name])
		}
	}
	for name := range seen {
		if !names[name] {
			t.Errorf("unexpected message %s in done or dead", name)
		}
	}
	// The tree is what the checkpoints say: each done message's change
	// (its out file, holding its id) and nothing of a dead one (reverted).
	want := map[string]string{}
	for _, m := range p.messages(".decree/inbox/done") {
		name := strings.TrimSuffix(m, ".md")
		id := doneID(t, p, m)
		want["out-"+name+".txt"] = id + "\n"
		if d, err := os.ReadFile(p.path(".decree/runs/" + id + "/changes.diff")); err != nil || !strings.Contains(string(d), "out-"+name+".txt") {
			t.Errorf("changes.diff of %s does not record out-%s.txt: %v", id, name, err)
		}
	}
	p.sameTree(want)
	t.Logf("%d messages: %d done, %d dead", len(names), len(p.messages(".decree/inbox/done")), len(p.messages(".decree/inbox/dead")))
}

// ledgerLine is one line of the fault routine's ledger.
type ledgerLine struct {
	kind, msg string
	attempt   int
	ns        int64
	pid       int
}

func readLedger(path string) []ledgerLine {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []ledgerLine
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) < 4 {
			continue // a line cut by a kill
		}
		l := ledgerLine{kind: fs[0], msg: fs[1]}
		l.attempt, _ = strconv.Atoi(fs[2])
		l.ns, _ = strconv.ParseInt(fs[3], 10, 64)
		if len(fs) > 4 {
			l.pid, _ = strconv.Atoi(fs[4])
		}
		out = append(out, l)
	}
	return out
}

// runningAttempt returns the pid of the routine of the latest started
// attempt when it still runs, else 0.
func runningAttempt(ledger string) int {
	lines := readLedger(ledger)
	for i := len(lines) - 1; i >= 0; i-- {
		switch lines[i].kind {
		case "END":
			return 0
		case "START":
			if alive(lines[i].pid) {
				return lines[i].pid
			}
			return 0
		}
	}
	return 0
}

// workerOf returns the id of the worker whose process is an ancestor of
// pid, or "".
func workerOf(pid int, workers map[string]*testtool.Proc) string {
	for p := pid; p > 1; {
		for id, w := range workers {
			if w.Cmd.Process.Pid == p {
				return id
			}
		}
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p))
		if err != nil {
			return ""
		}
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		fs := strings.Fields(s[i+2:])
		if len(fs) < 2 {
			return ""
		}
		p, _ = strconv.Atoi(fs[1])
	}
	return ""
}

// checkNoOverlap fails for every line an attempt wrote after a later
// attempt of the same message had started.
func checkNoOverlap(t *testing.T, ledger string) {
	t.Helper()
	lines := readLedger(ledger)
	starts := map[string][]ledgerLine{} // message -> starts
	for _, l := range lines {
		if l.kind == "START" {
			starts[l.msg] = append(starts[l.msg], l)
		}
	}
	retried, late := 0, 0
	for _, ss := range starts {
		sort.Slice(ss, func(i, j int) bool { return ss[i].attempt < ss[j].attempt })
		retried += len(ss) - 1
	}
	for _, l := range lines {
		for _, s := range starts[l.msg] {
			if s.attempt > l.attempt && l.ns > s.ns {
				late++
				if late <= 10 {
					t.Errorf("%s of %s attempt %d at %d, %s after attempt %d started",
						l.kind, l.msg, l.attempt, l.ns, time.Duration(l.ns-s.ns), s.attempt)
				}
				break
			}
		}
	}
	if late > 10 {
		t.Errorf("... %d writes by lost attempts after their retry started in all", late)
	}
	if retried == 0 {
		t.Errorf("no attempt was retried: the faults hit nothing")
	}
	t.Logf("%d ledger lines, %d retried attempts, %d late writes", len(lines), retried, late)
}

// TestEmbeddedKillLeavesNoRoutine: kill -9 of `decreectl run` (embedded
// controller and worker) leaves no process of the routine running, not
// even one that left the session with setsid.
func TestEmbeddedKillLeavesNoRoutine(t *testing.T) {
	testtool.Require(t, "bash")
	testtool.Require(t, "setsid")
	t.Parallel()
	p := newProject(t, binary, baseConfig)
	p.routine("develop", "", `setsid bash -c 'echo $$ > .decree/detached.pid; exec sleep 120' &
sleep 120 &
echo $! > .decree/sleep.pid
wait`)
	ctl := start(t, p.dir, "decreectl", "-C", p.dir, "run", "-m", "detach", "-p", "work")
	testtool.WaitFor(t, 30*time.Second, "the routine to start", func() bool {
		return p.exists(".decree/detached.pid") && p.exists(".decree/sleep.pid")
	})
	detached, sleeper := readPid(t, p, ".decree/detached.pid"), readPid(t, p, ".decree/sleep.pid")
	ctl.Signal(syscall.SIGKILL)
	ctl.Wait(t, 10*time.Second)
	testtool.WaitFor(t, 5*time.Second, "every routine process to die with decreectl", func() bool {
		return !alive(detached) && !alive(sleeper)
	})
}

// doneID reads the message id of a file in inbox/done/.
func doneID(t *testing.T, p *project, file string) string {
	t.Helper()
	for _, line := range strings.Split(p.read(".decree/inbox/done/"+file), "\n") {
		if id, ok := strings.CutPrefix(line, "id: "); ok {
			return strings.Trim(strings.TrimSpace(id), `"'`)
		}
	}
	t.Fatalf("%s has no id", file)
	return ""
}
