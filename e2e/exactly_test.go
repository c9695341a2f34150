package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/decreehq/decree/internal/testtool"
)

// These tests reproduce, with real processes, what broke the promise that
// every message is processed exactly once and nothing is lost (issue #11,
// items 1, 2, 5 and 6).

// TestRunLeavesOtherMessagesAlone: `decreectl run` processes its own chain
// and nothing else; a message queued before it stays queued, untouched, and
// the command's exit never fails a message.
func TestRunLeavesOtherMessagesAlone(t *testing.T) {
	testtool.Require(t, "bash")
	t.Parallel()
	p := newProject(t, binary, baseConfig)
	p.routine("develop", "", `echo "$message_id" >> ran.txt`)
	p.write(".decree/inbox/pre.md", "hi\n")
	r := p.ctl("", "run", "-m", "x", "-p", "go")
	mustCode(t, r, 0)
	if got := p.messages(".decree/inbox/done"); len(got) != 1 || got[0] != "x.md" {
		t.Errorf("done = %v, want [x.md]\n%s", got, r)
	}
	if got := p.messages(".decree/inbox/dead"); len(got) != 0 {
		t.Errorf("dead = %v, want none\n%s", got, r)
	}
	if got := p.messages(".decree/inbox"); len(got) != 1 || got[0] != "pre.md" {
		t.Errorf("inbox = %v, want [pre.md] still queued\n%s", got, r)
	}
	if runs := p.runs(); len(runs) != 1 {
		t.Errorf("runs = %v, want only x's run", runs)
	}
	if ran := strings.Fields(p.read("ran.txt")); len(ran) != 1 {
		t.Errorf("routine ran for %v, want once for x", ran)
	}
	// The message left queued is processed by `process`, once.
	mustCode(t, p.ctl("", "process"), 0)
	if got := p.messages(".decree/inbox/done"); len(got) != 2 {
		t.Errorf("after process done = %v, want x.md and pre.md", got)
	}
}

// TestSecondRunJoinsTheFirst: a second `decreectl run` started while the
// first one runs a slow routine submits through the running controller and
// waits for its own chain; both messages are done, both commands exit 0.
func TestSecondRunJoinsTheFirst(t *testing.T) {
	testtool.Require(t, "bash")
	t.Parallel()
	p := newProject(t, binary, baseConfig)
	p.routine("develop", "", `echo "start $message_id" >> ran.txt
if grep -q slow "$message_file"; then touch .decree/slow-started; sleep 2; fi
echo "end $message_id" >> ran.txt`)
	first := start(t, p.dir, "decreectl", "-C", p.dir, "run", "-m", "a", "-p", "slow work")
	testtool.WaitFor(t, 30*time.Second, "the first routine to start", func() bool { return p.exists(".decree/slow-started") })
	time.Sleep(300 * time.Millisecond)
	r := p.ctl("", "run", "-m", "b", "-p", "quick work")
	mustCode(t, r, 0)
	if code := first.Wait(t, 60*time.Second); code != 0 {
		t.Errorf("first run exited %d\n%s", code, first.Out)
	}
	if got := p.messages(".decree/inbox/done"); len(got) != 2 {
		t.Errorf("done = %v, want a.md and b.md\nsecond: %s\nfirst: %s", got, r, first.Out)
	}
	if got := p.messages(".decree/inbox/dead"); len(got) != 0 {
		t.Errorf("dead = %v, want none", got)
	}
	lines := strings.Split(strings.TrimSpace(p.read("ran.txt")), "\n")
	if len(lines) != 4 || !strings.HasPrefix(lines[0], "start") || !strings.HasPrefix(lines[1], "end") {
		t.Errorf("routine runs overlapped or repeated:\n%s", strings.Join(lines, "\n"))
	}
}

// TestPoisonInboxFiles: a file whose name holds a newline, a FIFO in the
// inbox and one in the outbox are each refused once (moved to inbox/dead/
// under a safe name with a note naming the original, never opened), status
// answers, and the controller stops on SIGTERM within its grace.
func TestPoisonInboxFiles(t *testing.T) {
	testtool.Require(t, "bash")
	t.Parallel()
	p := newProject(t, binary, baseConfig)
	p.routine("develop", "", `echo "$message_id" >> ran.txt`)
	p.write(".decree/inbox/bad\nname.md", "poison\n")
	for _, f := range []string{".decree/inbox/pipe.md", ".decree/outbox/pipe2.md"} {
		if err := syscall.Mkfifo(p.path(f), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	p.write(".decree/inbox/good.md", "fine\n")
	ctl := startController(t, p)
	startWorker(t, p, "w1")
	testtool.WaitFor(t, 30*time.Second, "the good message to be done", func() bool {
		return len(p.messages(".decree/inbox/done")) == 1
	})
	testtool.WaitFor(t, 10*time.Second, "the poison files to be refused", func() bool {
		return len(p.messages(".decree/inbox")) == 0 && !p.exists(".decree/outbox/pipe2.md")
	})
	dead := p.messages(".decree/inbox/dead")
	if len(dead) != 3 {
		t.Errorf("dead = %q, want the three poison files", dead)
	}
	notes := ""
	for _, d := range dead {
		if strings.ContainsAny(d, "\n\r\t") {
			t.Errorf("dead file name %q holds a control character", d)
		}
		notes += p.read(".decree/inbox/dead/"+d+".dead.txt") + "\n"
	}
	contains(t, "notes", notes, `"bad\nname.md"`)
	contains(t, "notes", notes, "FIFO")
	if b, err := os.ReadFile(p.path("ran.txt")); err != nil || len(strings.Fields(string(b))) != 1 {
		t.Errorf("routine ran %q, want once (for good.md)", b)
	}
	// Nothing hangs: status lists the dead letters, twice.
	for range 2 {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		cmd := exec.CommandContext(ctx, bin(t, "decreectl"), "-C", p.dir, "status")
		out, err := cmd.CombinedOutput()
		cancel()
		if err != nil {
			t.Fatalf("status: %v\n%s", err, out)
		}
		contains(t, "status", string(out), "3 dead")
	}
	ctl.Signal(syscall.SIGTERM)
	ctl.Wait(t, 15*time.Second)
}

// TestInterruptRun: Ctrl-C during `decreectl run` stops the routine's
// whole process group, records the attempt as interrupted and says what
// happened and what to do; a later unrelated run does not resume it,
// status lists it, and `decreectl cancel` reverts its partial changes.
func TestInterruptRun(t *testing.T) {
	testtool.Require(t, "bash")
	testtool.Require(t, "setsid")
	t.Parallel()
	p := newProject(t, binary, baseConfig)
	p.routine("develop", "", `echo "$message_id $DECREE_ATTEMPT" >> .decree/ran.txt
if grep -q slow "$message_file"; then
  echo partial > partial.txt
  setsid bash -c 'echo $$ > .decree/detached.pid; exec sleep 120' &
  sleep 120 &
  echo $! > .decree/sleep.pid
  wait
fi
echo done > "out-$message_id.txt"`)
	run := start(t, p.dir, "decreectl", "-C", p.dir, "run", "-m", "slow", "-p", "slow work")
	testtool.WaitFor(t, 30*time.Second, "the routine to start", func() bool {
		return p.exists(".decree/detached.pid") && p.exists(".decree/sleep.pid")
	})
	detached, sleeper := readPid(t, p, ".decree/detached.pid"), readPid(t, p, ".decree/sleep.pid")
	id := p.onlyRun()
	run.Signal(syscall.SIGINT)
	if code := run.Wait(t, 20*time.Second); code != 130 {
		t.Errorf("interrupted run exited %d, want 130", code)
	}
	out := run.Out.String()
	for _, want := range []string{"interrupted", id, "attempt 1", "put back to where attempt 1 started", "decreectl process", "decreectl cancel " + id} {
		contains(t, "run output", out, want)
	}
	notContains(t, "run output", out, "context canceled")
	testtool.WaitFor(t, 5*time.Second, "the routine's processes to die", func() bool {
		return !alive(detached) && !alive(sleeper)
	})
	contains(t, "state.json", p.read(".decree/runs/"+id+"/state.json"), `"interrupted"`)
	// An interrupted attempt is no failure: the tree is as it was when the
	// attempt started.
	if p.exists("partial.txt") {
		t.Error("partial.txt of the interrupted attempt is still in the tree")
	}
	if got := p.messages(".decree/inbox"); len(got) != 1 || got[0] != "slow.md" {
		t.Fatalf("inbox = %v, want slow.md queued", got)
	}

	// An unrelated run does not touch the interrupted message.
	r := p.ctl("", "run", "-m", "other", "-p", "other work")
	mustCode(t, r, 0)
	if ran := strings.Count(p.read(".decree/ran.txt"), id); ran != 1 {
		t.Errorf("the interrupted message ran %d times, want once (not resumed by another run)", ran)
	}
	if got := p.messages(".decree/inbox"); len(got) != 1 {
		t.Errorf("inbox = %v, want slow.md still queued", got)
	}
	st := p.ctl("", "status")
	mustCode(t, st, 0)
	contains(t, "status", st.stdout, "interrupted")
	contains(t, "status", st.stdout, id)

	// Cancelling it dead-letters it.
	c := p.ctl("", "cancel", id)
	mustCode(t, c, 0)
	if _, err := os.Stat(filepath.Join(p.dir, ".decree/inbox/dead/slow.md")); err != nil {
		t.Errorf("slow.md is not dead-lettered after cancel: %v\n%s", err, c)
	}
	contains(t, "note", p.read(".decree/inbox/dead/slow.md.dead.txt"), "reason: Cancelled")
}

// TestFollowUpsOnceAfterControllerCrash: the controller is killed with -9
// while it collects 120 follow-ups of a message; after a restart every
// follow-up runs exactly once and the parent is done once.
func TestFollowUpsOnceAfterControllerCrash(t *testing.T) {
	testtool.Require(t, "bash")
	t.Parallel()
	const n = 120
	p := newProject(t, binary, "max_retries: 2\nmax_depth: 200\ndefault_routine: develop\n")
	ledger := filepath.Join(t.TempDir(), "ledger")
	p.routine("develop", "", fmt.Sprintf(`echo "$message_id" >> %q
if [ "$seq" = 0 ]; then
  for i in $(seq 1 %d); do printf -- '---\nroutine: develop\n---\nfollow-up %%s\n' "$i" > ".decree/outbox/f$(printf %%03d $i).md"; done
fi`, ledger, n))
	p.write(".decree/inbox/parent.md", "make follow-ups\n")
	ctl := startController(t, p)
	startWorker(t, p, "w1")
	// Strike as soon as the first follow-up reaches the inbox.
	hit := false
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		ents, _ := os.ReadDir(p.path(".decree/inbox"))
		out, _ := os.ReadDir(p.path(".decree/outbox"))
		moved := 0
		for _, e := range ents {
			if strings.HasSuffix(e.Name(), "-1.md") || strings.HasSuffix(e.Name(), "-2.md") {
				moved++
			}
		}
		if moved > 0 && len(out) > 0 {
			ctl.Signal(syscall.SIGKILL)
			hit = true
			break
		}
		time.Sleep(time.Millisecond)
	}
	ctl.Wait(t, 10*time.Second)
	queued, _ := os.ReadDir(p.path(".decree/inbox"))
	t.Logf("killed during collection: %v (%d inbox entries)", hit, len(queued))
	startController(t, p)
	testtool.WaitFor(t, 120*time.Second, "every message to be done", func() bool {
		return len(p.messages(".decree/inbox/done")) >= n+1 && len(p.messages(".decree/inbox")) == 0
	})
	runs := map[string]int{}
	led, err := os.ReadFile(ledger)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range strings.Fields(string(led)) {
		runs[id]++
	}
	ids := 0
	for id, c := range runs {
		if strings.HasSuffix(id, "-0") {
			continue
		}
		ids++
		if c != 1 {
			t.Errorf("follow-up %s ran %d times", id, c)
		}
	}
	if ids != n {
		t.Errorf("%d distinct follow-ups ran, want %d", ids, n)
	}
	if done := len(p.messages(".decree/inbox/done")); done != n+1 {
		t.Errorf("%d messages done, want %d", done, n+1)
	}
	if dead := p.messages(".decree/inbox/dead"); len(dead) != 0 {
		t.Errorf("dead: %v", dead)
	}
}

// TestSecondRunTakesOver: a second `decreectl run` joined the first one's
// controller; Ctrl-C stops the first; the second takes over, finishes its
// own chain, and leaves the first one's interrupted message alone.
func TestSecondRunTakesOver(t *testing.T) {
	testtool.Require(t, "bash")
	t.Parallel()
	p := newProject(t, binary, baseConfig)
	p.routine("develop", "", `echo "$message_id" >> .decree/ran.txt
if grep -q slow "$message_file"; then touch .decree/slow-started; sleep 120; fi`)
	first := start(t, p.dir, "decreectl", "-C", p.dir, "run", "-m", "a", "-p", "slow work")
	testtool.WaitFor(t, 30*time.Second, "the first routine to start", func() bool { return p.exists(".decree/slow-started") })
	second := start(t, p.dir, "decreectl", "-C", p.dir, "run", "-m", "b", "-p", "quick work")
	testtool.WaitFor(t, 30*time.Second, "the second message to be queued", func() bool { return p.exists(".decree/inbox/b.md") })
	first.Signal(syscall.SIGINT)
	if code := first.Wait(t, 30*time.Second); code != 130 {
		t.Errorf("first run exited %d, want 130\n%s", code, first.Out)
	}
	if code := second.Wait(t, 60*time.Second); code != 0 {
		t.Fatalf("second run exited %d, want 0\n%s", code, second.Out)
	}
	contains(t, "second run", second.Out.String(), "taking over")
	if !p.exists(".decree/inbox/done/b.md") {
		t.Errorf("b is not done: inbox %v", p.messages(".decree/inbox"))
	}
	if got := p.messages(".decree/inbox"); len(got) != 1 || got[0] != "a.md" {
		t.Errorf("inbox = %v, want the interrupted a.md only", got)
	}
	ran := strings.Fields(p.read(".decree/ran.txt"))
	if len(ran) != 2 {
		t.Errorf("routine runs %v, want a once and b once", ran)
	}
}
