package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/decreehq/decree/internal/testtool"
)

// start runs one of decree's built commands in dir in the background; it
// is stopped at cleanup.
func start(t *testing.T, dir, name string, args ...string) *testtool.Proc {
	t.Helper()
	cmd := exec.Command(bin(t, name), args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "DECREE_CONTROLLER=")
	return testtool.Start(t, name, cmd)
}

// startController starts decree-controller on the project and waits until
// its socket accepts connections.
func startController(t *testing.T, p *project, extra ...string) *testtool.Proc {
	t.Helper()
	c := start(t, p.dir, "decree-controller", append([]string{"--project", p.dir}, extra...)...)
	sock := p.path(".decree/decree.sock")
	testtool.WaitFor(t, 20*time.Second, "the controller's socket", func() bool {
		select {
		case <-c.Done():
			t.Fatalf("decree-controller exited early:\n%s", c.Out)
		default:
		}
		return socketLive(sock)
	})
	return c
}

func startWorker(t *testing.T, p *project, id string) *testtool.Proc {
	t.Helper()
	return start(t, p.dir, "decree-worker", "--controller", "unix://"+p.path(".decree/decree.sock"), "--workspace", p.dir, "--id", id)
}

// alive reports whether pid is a running (not zombie) process.
func alive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// The state follows the ")" that ends the command name.
	s := string(b)
	if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) {
		return s[i+2] != 'Z'
	}
	return true
}

// readPid reads a pid a routine wrote, waiting while the file is still
// empty (the shell creates it before it writes the number).
func readPid(t *testing.T, p *project, rel string) int {
	t.Helper()
	var pid int
	testtool.WaitFor(t, 10*time.Second, rel+" to hold a pid", func() bool {
		var err error
		pid, err = strconv.Atoi(strings.TrimSpace(p.read(rel)))
		return err == nil
	})
	t.Cleanup(func() {
		if alive(pid) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	return pid
}

// TestThreeProcesses: decree-controller and decree-worker as separate
// processes; decreectl finds the controller on the project's socket and
// uses it (no embedded controller: the project lock would refuse one) to
// run a chain with follow-ups.
func TestThreeProcesses(t *testing.T) {
	t.Parallel()
	p := newProject(t, binary, baseConfig)
	p.routine("develop", "", `echo "$message_id" >> .decree/order.log
echo "step $seq" >> steps.txt
if [ "$seq" -lt 2 ]; then printf 'next step\n' > ".decree/outbox/step-$seq.md"; fi`)
	startController(t, p)
	startWorker(t, p, "e2e-worker")

	r := p.ctl("", "--verbose", "run", "-m", "chain", "-p", "start")
	mustCode(t, r, 0)
	contains(t, "decreectl log", r.stderr, "using the controller already serving the project")
	runs := p.runs()
	if len(runs) != 3 {
		t.Fatalf("runs = %v, want -0, -1, -2\n%s", runs, r)
	}
	for i, id := range runs {
		if !strings.HasSuffix(id, fmt.Sprintf("-%d", i)) {
			t.Errorf("runs[%d] = %s", i, id)
		}
		if !strings.Contains(p.read(".decree/runs/"+id+"/run.json"), `"worker_id": "e2e-worker"`) {
			t.Errorf("%s did not run on the separate worker:\n%s", id, p.read(".decree/runs/"+id+"/run.json"))
		}
	}
	p.sameTree(map[string]string{"steps.txt": "step 0\nstep 1\nstep 2\n"})
	// The long-running controller lists the worker.
	r = p.ctl("", "workers")
	mustCode(t, r, 0)
	contains(t, "workers", r.stdout, "e2e-worker")
}

// slowRoutine writes a marker and, on attempt 1, sleeps in the background
// of a wait so that the test can kill the controller meanwhile.
const slowRoutine = `echo "attempt $DECREE_ATTEMPT" >> .decree/attempts.log
echo "partial $DECREE_ATTEMPT" > "partial-$DECREE_ATTEMPT.txt"
if [ "$DECREE_ATTEMPT" = 1 ]; then
  sleep 120 &
  echo $! > .decree/sleep.pid
  echo $$ > .decree/slow.pid
  wait
  echo late > late.txt
fi
echo finished > done.txt`

// checkCrashRecovery asserts the state after a crash in attempt 1 and a
// restart: retried once, done once, tree = manifest + changes.diff.
func checkCrashRecovery(t *testing.T, p *project, name string) {
	t.Helper()
	if got := p.read(".decree/attempts.log"); got != "attempt 1\nattempt 2\n" {
		t.Errorf("attempts.log = %q", got)
	}
	if done := p.messages(".decree/inbox/done"); len(done) != 1 || done[0] != name+".md" {
		t.Errorf("done = %v", done)
	}
	if n := len(p.messages(".decree/inbox")) + len(p.messages(".decree/inbox/dead")); n != 0 {
		t.Errorf("left over: inbox %v dead %v", p.messages(".decree/inbox"), p.messages(".decree/inbox/dead"))
	}
	id := p.onlyRun()
	rj := p.runJSON(id)
	if rj.Attempts != 2 || rj.Outcome != "succeeded" || len(rj.Details) != 2 {
		t.Fatalf("run.json = %+v", rj)
	}
	contains(t, "attempt 1 error", rj.Details[0].Error, "controller restarted")
	after := map[string]string{"base.txt": "base\n", "partial-1.txt": "partial 1\n", "partial-2.txt": "partial 2\n", "done.txt": "finished\n"}
	p.sameTree(after)

	// The tree is the checkpoint plus changes.diff: reversing the diff
	// gives back exactly the manifest.
	testtool.Require(t, "git")
	diff := p.read(".decree/runs/" + id + "/changes.diff")
	if out, err := p.git(diff, "apply", "-R", "-"); err != nil {
		t.Fatalf("git apply -R changes.diff: %v %s", err, out)
	}
	p.sameTree(map[string]string{"base.txt": "base\n"})
	man := p.manifest(id)
	if len(man) != 1 || man["base.txt"].SHA256 != sha("base\n") {
		t.Errorf("manifest = %+v", man)
	}
}

// TestCrashControllerProcess: kill -9 of decree-controller while a routine
// runs on a separate decree-worker; a new controller counts the attempt as
// failed ("controller restarted") and retries; the worker stops the
// orphaned routine, whose lease the new controller does not know.
func TestCrashControllerProcess(t *testing.T) {
	t.Parallel()
	p := newProject(t, binary, baseConfig)
	p.write("base.txt", "base\n")
	p.routine("develop", "", slowRoutine)
	p.write(".decree/inbox/slow.md", "slow work\n")

	c := startController(t, p)
	startWorker(t, p, "crash-worker")
	testtool.WaitFor(t, 30*time.Second, "attempt 1 to start", func() bool { return p.exists(".decree/slow.pid") })
	bashPid, sleepPid := readPid(t, p, ".decree/slow.pid"), readPid(t, p, ".decree/sleep.pid")
	c.Signal(syscall.SIGKILL)
	c.Wait(t, 10*time.Second)
	if !alive(bashPid) {
		t.Fatalf("the routine died with the controller; the test proves nothing")
	}

	startController(t, p)
	testtool.WaitFor(t, 60*time.Second, "the message to be done", func() bool {
		return p.exists(".decree/inbox/done/slow.md") && hasRunJSON(p)
	})
	testtool.WaitFor(t, 30*time.Second, "the orphaned routine to be stopped", func() bool { return !alive(bashPid) && !alive(sleepPid) })
	if p.exists("late.txt") {
		t.Errorf("the orphaned attempt went on writing to the tree")
	}
	checkCrashRecovery(t, p, "slow")
}

// TestCrashEmbedded: kill -9 of `decreectl run` (embedded controller and
// worker) while its routine runs; the routine does not outlive it, and the
// next `decreectl process` retries the message by the rules.
func TestCrashEmbedded(t *testing.T) {
	t.Parallel()
	p := newProject(t, binary, baseConfig)
	p.write("base.txt", "base\n")
	p.routine("develop", "", slowRoutine)

	ctl := start(t, p.dir, "decreectl", "-C", p.dir, "run", "-m", "slow", "-p", "slow work")
	testtool.WaitFor(t, 30*time.Second, "attempt 1 to start", func() bool { return p.exists(".decree/slow.pid") })
	bashPid, _ := readPid(t, p, ".decree/slow.pid"), readPid(t, p, ".decree/sleep.pid")
	ctl.Signal(syscall.SIGKILL)
	ctl.Wait(t, 10*time.Second)
	testtool.WaitFor(t, 10*time.Second, "the routine to die with decreectl", func() bool { return !alive(bashPid) })

	r := p.ctl("", "process")
	mustCode(t, r, 0)
	if p.exists("late.txt") {
		t.Errorf("the killed attempt wrote late.txt")
	}
	checkCrashRecovery(t, p, "slow")
	if _, err := os.Stat(filepath.Join(p.dir, ".decree", "decree.sock")); err == nil && socketLive(p.path(".decree/decree.sock")) {
		t.Errorf("a controller still serves the project after decreectl exited")
	}
}

// hasRunJSON reports whether some run of the project has its run.json.
func hasRunJSON(p *project) bool {
	m, _ := filepath.Glob(p.path(".decree/runs/*/run.json"))
	return len(m) > 0
}

// TestWaitsForCapableWorker: with a separate controller more workers may
// join, so a routine no connected worker can run waits, with a warning
// saying what for, and runs once a capable worker connects.
func TestWaitsForCapableWorker(t *testing.T) {
	t.Parallel()
	p := newProject(t, binary, baseConfig+`routines:
  gpu-job:
    requires:
      gpu: "yes"
`)
	p.routine("gpu-job", "", `echo ran > ran.txt`)
	startController(t, p)
	startWorker(t, p, "plain-worker")

	done := make(chan result, 1)
	go func() { done <- runCtl(t, binary, p.dir, "", "run", "-m", "g", "-p", "x", "-v", "routine=gpu-job") }()
	testtool.WaitFor(t, 60*time.Second, "the waiting warning in events.jsonl", func() bool {
		select {
		case r := <-done:
			t.Fatalf("decreectl run ended before a capable worker joined:\n%s", r)
		default:
		}
		b, _ := os.ReadFile(p.path(".decree/events.jsonl"))
		return strings.Contains(string(b), "waits for a worker")
	})
	start(t, p.dir, "decree-worker", "--controller", "unix://"+p.path(".decree/decree.sock"), "--workspace", p.dir, "--id", "gpu-worker", "--label", "gpu=yes")
	var r result
	select {
	case r = <-done:
	case <-time.After(2 * time.Minute):
		t.Fatal("the message did not run after a capable worker joined")
	}
	mustCode(t, r, 0)
	contains(t, "decreectl stderr", r.stderr, `waits for a worker: no connected worker with driver "shell" has the labels gpu=yes`)
	id := p.onlyRun()
	if rj := p.read(".decree/runs/" + id + "/run.json"); !strings.Contains(rj, `"worker_id": "gpu-worker"`) {
		t.Errorf("ran elsewhere than on the labelled worker:\n%s", rj)
	}
	p.sameTree(map[string]string{"ran.txt": "ran\n"})
}
