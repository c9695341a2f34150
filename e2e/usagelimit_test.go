package e2e

import (
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/decreehq/decree/internal/testtool"
)

// limitedRoutine is a stand-in for a routine whose AI tool hits its usage
// limit on the first attempt: it changes the tree, prints a session id and
// Claude's machine-readable notice with a reset RESET seconds away, and
// fails. Later attempts record what they see.
const limitedRoutine = `if [ "$DECREE_ATTEMPT" = 1 ]; then
  echo half-done > partial.txt
  echo "Session ID: sess-4f2a"
  echo "Claude AI usage limit reached|$(( $(date +%s) + RESET ))"
  exit 1
fi
{
  echo "attempt=$DECREE_ATTEMPT"
  echo "previous=${DECREE_PREVIOUS_SESSION_ID:-}"
  if [ -e partial.txt ]; then echo "partial=present"; else echo "partial=absent"; fi
} > retry.txt`

// TestUsageLimitWait: a usage limit with a short reset is waited out and
// the message retried from the checkpoint, with the session id, without
// the limited attempt counting (max_retries: 1 would dead-letter it).
func TestUsageLimitWait(t *testing.T) {
	t.Parallel()
	for _, m := range modes {
		t.Run(string(m), func(t *testing.T) {
			t.Parallel()
			p := newProject(t, m, "max_retries: 1\ndefault_routine: limited\n")
			p.routine("limited", "", strings.ReplaceAll(limitedRoutine, "RESET", "3"))
			start := time.Now()
			r := p.ctl("", "run", "-m", "limited", "-p", "x")
			mustCode(t, r, 0)
			if waited := time.Since(start); waited < 2*time.Second {
				t.Errorf("finished after %s: the reset was not waited for", waited)
			}
			id := p.onlyRun()
			contains(t, "decreectl", r.stderr, "usage limit reached; waiting until ")
			contains(t, "decreectl", r.stderr, "to retry "+id)
			contains(t, "the retry", p.read("retry.txt"), "attempt=2\nprevious=sess-4f2a\npartial=absent\n")
			rj := p.runJSON(id)
			if rj.Outcome != "succeeded" || rj.Attempts != 2 || rj.MaxAttempts != 2 {
				t.Errorf("run.json: outcome %s, attempts %d of %d", rj.Outcome, rj.Attempts, rj.MaxAttempts)
			}
			contains(t, "events", p.read(".decree/events.jsonl"), `"kind":"usage_limit_wait"`)
			contains(t, "state.json", p.read(".decree/runs/"+id+"/state.json"), `"session_id": "sess-4f2a"`)
			if p.exists(".decree/inbox/dead/limited.md") {
				t.Error("the message was dead-lettered")
			}
		})
	}
}

// TestUsageLimitInterrupt: SIGINT during a wait exits 130 and keeps the
// message queued; meanwhile status (over the running command's socket)
// shows the wait.
func TestUsageLimitInterrupt(t *testing.T) {
	t.Parallel()
	p := newProject(t, binary, "max_retries: 1\ndefault_routine: limited\n")
	p.routine("limited", "", strings.ReplaceAll(limitedRoutine, "RESET", "3600"))
	run := start(t, p.dir, "decreectl", "-C", p.dir, "run", "-m", "limited", "-p", "x")
	testtool.WaitFor(t, 30*time.Second, "the wait to be announced", func() bool {
		return strings.Contains(run.Out.String(), "usage limit reached; waiting until ")
	})
	contains(t, "announcement", run.Out.String(), "(59m) to retry ")
	r := p.ctl("", "status")
	mustCode(t, r, 0)
	contains(t, "status", r.stdout, "waiting     usage limit reached; ")
	run.Signal(syscall.SIGINT)
	if code := run.Wait(t, 20*time.Second); code != 130 {
		t.Errorf("exit %d after SIGINT, want 130\n%s", code, run.Out)
	}
	if !p.exists(".decree/inbox/limited.md") {
		t.Errorf("the message left the inbox: inbox %v, dead %v", p.list(".decree/inbox"), p.list(".decree/inbox/dead"))
	}
	if p.exists("partial.txt") {
		t.Error("the limited attempt's change was not reverted")
	}
	if p.exists("retry.txt") {
		t.Error("the message was retried before the reset")
	}

	// The next command to process the inbox waits out the rest of the
	// recorded wait instead of retrying at once.
	proc := start(t, p.dir, "decreectl", "-C", p.dir, "process")
	testtool.WaitFor(t, 30*time.Second, "the wait to be announced again", func() bool {
		return strings.Contains(proc.Out.String(), "usage limit reached; waiting until ")
	})
	if p.exists("retry.txt") {
		t.Error("the restarted controller retried before the reset")
	}
	proc.Signal(syscall.SIGINT)
	if code := proc.Wait(t, 20*time.Second); code != 130 {
		t.Errorf("process exit %d after SIGINT, want 130\n%s", code, proc.Out)
	}
	if !p.exists(".decree/inbox/limited.md") {
		t.Error("the message left the inbox after the second interrupt")
	}
}

// TestUsageLimitSurvivesControllerCrash: the controller is killed (-9)
// after the routine printed a usage-limit notice but before the attempt's
// end was recorded. The restarted controller finds the lost attempt's
// log, records the limit instead of a failure, waits, and retries: with
// max_retries 1 the message is done, not dead-lettered.
func TestUsageLimitSurvivesControllerCrash(t *testing.T) {
	testtool.Require(t, "bash")
	t.Parallel()
	p := newProject(t, binary, "max_retries: 1\ndefault_routine: limited\n")
	p.routine("limited", "", `if [ ! -e .decree/limited-once ]; then
  touch .decree/limited-once
  echo "Claude AI usage limit reached|$(( $(date +%s) + 3 ))"
  sleep 1.5
  touch .decree/limit-printed
  sleep 120
fi
echo "attempt=$DECREE_ATTEMPT" > retry.txt`)
	p.write(".decree/inbox/limited.md", "x\n")
	ctl := startController(t, p)
	startWorker(t, p, "w1")
	testtool.WaitFor(t, 30*time.Second, "the notice to be printed", func() bool { return p.exists(".decree/limit-printed") })
	ctl.Signal(syscall.SIGKILL)
	ctl.Wait(t, 10*time.Second)
	startController(t, p)
	testtool.WaitFor(t, 90*time.Second, "the retry to finish", func() bool { return p.exists(".decree/inbox/done/limited.md") })
	contains(t, "retry.txt", p.read("retry.txt"), "attempt=2")
	if dead := p.messages(".decree/inbox/dead"); len(dead) != 0 {
		t.Errorf("dead = %v", dead)
	}
}
