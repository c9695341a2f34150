package e2e

import (
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/decreehq/decree/internal/testtool"
)

// An interrupted attempt is not a failed one (issue #21): the tree goes
// back to where the attempt started and the same attempt runs again,
// without using up the message's attempts.

// stopOnceRoutine writes half its work, then, the first time only, waits to
// be stopped; run again it does all of its work. It records each attempt
// (outside the tracked tree).
const stopOnceRoutine = `echo "$message_id $DECREE_ATTEMPT/$DECREE_MAX_ATTEMPTS" >> .decree/ran.txt
echo "working on $message_id"
for i in $(seq 1 60); do
  echo "line $i" >> out.txt
  if [ "$i" = 10 ] && [ ! -e .decree/stopped-once ]; then
    touch .decree/at-ten
    sleep 120
  fi
done`

// stopAtTen waits for stopOnceRoutine to reach line 10, lets its next run
// go through, stops proc with sig, checks its exit code and that the tree
// no longer holds the interrupted attempt's work.
func stopAtTen(t *testing.T, p *project, proc *testtool.Proc, sig syscall.Signal, code int) {
	t.Helper()
	testtool.WaitFor(t, 30*time.Second, "the routine to reach line 10", func() bool { return p.exists(".decree/at-ten") })
	p.write(".decree/stopped-once", "")
	proc.Signal(sig)
	if got := proc.Wait(t, 20*time.Second); got != code {
		t.Fatalf("exit %d after %v, want %d\n%s", got, sig, code, proc.Out)
	}
	if p.exists("out.txt") {
		t.Errorf("the interrupted attempt's out.txt is still in the tree:\n%s", p.read("out.txt"))
	}
}

// TestCtrlCKeepsTheLastAttempt: with max_retries 1, Ctrl-C of `run` during
// the only attempt, then `process`, runs attempt 1 again from a clean tree
// and the message is done (it was dead-lettered RetriesExhausted before).
func TestCtrlCKeepsTheLastAttempt(t *testing.T) {
	testtool.Require(t, "bash")
	t.Parallel()
	p := newProject(t, binary, "max_retries: 1\ndefault_routine: develop\n")
	p.routine("develop", "", stopOnceRoutine)
	p.write("keep.txt", "kept\n")
	run := start(t, p.dir, "decreectl", "-C", p.dir, "run", "-m", "work", "-p", "x")
	stopAtTen(t, p, run, syscall.SIGINT, 130)
	r := p.ctl("", "process")
	mustCode(t, r, 0)
	id := p.onlyRun()
	if got := p.messages(".decree/inbox/done"); len(got) != 1 {
		t.Fatalf("done = %v, want work.md\n%s", got, r)
	}
	if lines := strings.Count(p.read("out.txt"), "\n"); lines != 60 {
		t.Errorf("out.txt has %d lines, want 60 (the rerun built on the interrupted attempt's work)", lines)
	}
	if got := p.read(".decree/ran.txt"); got != id+" 1/1\n"+id+" 1/1\n" {
		t.Errorf("attempts run:\n%swant attempt 1 of 1, twice", got)
	}
	rj := p.runJSON(id)
	if rj.Outcome != "succeeded" || rj.Attempts != 1 || rj.MaxAttempts != 1 {
		t.Errorf("run.json: outcome %s, attempts %d of %d; want succeeded, 1 of 1", rj.Outcome, rj.Attempts, rj.MaxAttempts)
	}
	if !p.exists(".decree/runs/" + id + "/interrupted-1.routine.log") {
		t.Errorf("the interrupted attempt's log was not kept: %v", p.list(".decree/runs/"+id))
	}
	contains(t, "keep.txt", p.read("keep.txt"), "kept")
}

// TestCtrlCStubbornRoutine: Ctrl-C of `run` while the routine ignores
// SIGTERM. The worker kills it before its lease, no longer renewed, runs
// out, and the controller waits for that: the attempt is recorded as
// interrupted, the tree is put back and the output says so (the
// controller gave up on its loop after 10s before, the lease's own 10s,
// and printed "no attempt was under way").
func TestCtrlCStubbornRoutine(t *testing.T) {
	testtool.Require(t, "bash")
	t.Parallel()
	p := newProject(t, binary, "max_retries: 1\ndefault_routine: develop\n")
	p.routine("develop", "", `trap '' TERM
echo half > half.txt
touch .decree/started
for i in $(seq 1 600); do sleep 0.2; done`)
	run := start(t, p.dir, "decreectl", "-C", p.dir, "run", "-m", "stubborn", "-p", "x")
	testtool.WaitFor(t, 30*time.Second, "the routine to start", func() bool { return p.exists(".decree/started") })
	id := p.onlyRun()
	begin := time.Now()
	run.Signal(syscall.SIGINT)
	if got := run.Wait(t, 30*time.Second); got != 130 {
		t.Fatalf("exit %d after Ctrl-C, want 130\n%s", got, run.Out)
	}
	took := time.Since(begin)
	out := run.Out.String()
	for _, want := range []string{"interrupted " + id, "during attempt 1", "put back to where attempt 1 started"} {
		contains(t, "run output", out, want)
	}
	notContains(t, "run output", out, "no attempt was under way")
	notContains(t, "run output", out, "did not stop within the grace period")
	notContains(t, "run output", out, "event log closed")
	if p.exists("half.txt") {
		t.Error("the interrupted attempt's half.txt is still in the tree")
	}
	contains(t, "state.json", p.read(".decree/runs/"+id+"/state.json"), `"interrupted"`)
	// Killed within the lease (10s, heartbeats every 300ms), not after it.
	if took > 15*time.Second {
		t.Errorf("Ctrl-C took %s to end the routine", took)
	}
}

// TestCleanStopRerunsTheAttempt: SIGTERM to decree-controller during an
// attempt (a separate worker runs it) puts the tree back, and the next
// controller runs the same attempt again: the result has exactly the
// routine's 60 lines, with max_retries 1 and with 3.
func TestCleanStopRerunsTheAttempt(t *testing.T) {
	testtool.Require(t, "bash")
	t.Parallel()
	for _, max := range []string{"1", "3"} {
		t.Run("max_retries="+max, func(t *testing.T) {
			t.Parallel()
			p := newProject(t, binary, "max_retries: "+max+"\ndefault_routine: develop\n")
			p.routine("develop", "", stopOnceRoutine)
			p.write(".decree/inbox/work.md", "do the work\n")
			ctl := startController(t, p)
			startWorker(t, p, "w1")
			stopAtTen(t, p, ctl, syscall.SIGTERM, 0)
			id := p.onlyRun()
			contains(t, "state.json", p.read(".decree/runs/"+id+"/state.json"), `"state": "interrupted"`)
			startController(t, p)
			startWorker(t, p, "w2")
			testtool.WaitFor(t, 60*time.Second, "the message to be done", func() bool { return len(p.messages(".decree/inbox/done")) == 1 })
			if lines := strings.Count(p.read("out.txt"), "\n"); lines != 60 {
				t.Errorf("out.txt has %d lines, want 60", lines)
			}
			want := id + " 1/" + max + "\n" + id + " 1/" + max + "\n"
			if got := p.read(".decree/ran.txt"); got != want {
				t.Errorf("attempts run:\n%swant\n%s", got, want)
			}
			if dead := p.messages(".decree/inbox/dead"); len(dead) != 0 {
				t.Errorf("dead = %v", dead)
			}
		})
	}
}

// TestMigrationOnceAfterRequeueOrInterrupt: a migration whose message is
// back in the inbox (requeued from dead/, or interrupted by Ctrl-C) is
// resumed by the next `process`, never queued a second time; the dry run
// says so.
func TestMigrationOnceAfterRequeueOrInterrupt(t *testing.T) {
	testtool.Require(t, "bash")
	t.Parallel()
	t.Run("requeue", func(t *testing.T) {
		t.Parallel()
		p := newProject(t, binary, "max_retries: 1\ndefault_routine: develop\n")
		p.routine("develop", "", `echo "$message_id" >> .decree/ran.txt
[ -e .decree/fixed ] || exit 1
echo ok > "$(basename "$spec_file" .spec.md).out"`)
		p.write(".decree/migrations/01-a.spec.md", "first\n")
		p.write(".decree/migrations/02-b.spec.md", "second\n")
		mustCode(t, p.ctl("", "process"), 1)
		dead := p.messages(".decree/inbox/dead")
		if len(dead) != 1 {
			t.Fatalf("dead = %v, want the first migration", dead)
		}
		id := strings.Fields(p.read(".decree/ran.txt"))[0]
		p.write(".decree/fixed", "")
		mustCode(t, p.ctl("", "requeue", id), 0)
		dry := p.ctl("", "process", "--dry-run")
		contains(t, "dry run", dry.stdout, "01-a.spec.md (queued as "+id+", resumes)")
		r := p.ctl("", "process")
		mustCode(t, r, 0)
		ran := strings.Fields(p.read(".decree/ran.txt"))
		if len(ran) != 3 || ran[0] != id || ran[1] != id || ran[2] == id {
			t.Errorf("routine ran for %v, want %s twice (failed, then requeued) and then the second migration once\n%s", ran, id, r)
		}
		contains(t, "processed.md", p.read(".decree/processed.md"), "01-a.spec.md")
		contains(t, "processed.md", p.read(".decree/processed.md"), "02-b.spec.md")
	})
	t.Run("interrupt", func(t *testing.T) {
		t.Parallel()
		p := newProject(t, binary, "max_retries: 1\ndefault_routine: develop\n")
		p.routine("develop", "", stopOnceRoutine)
		p.write(".decree/migrations/01-a.spec.md", "first\n")
		run := start(t, p.dir, "decreectl", "-C", p.dir, "process")
		stopAtTen(t, p, run, syscall.SIGINT, 130)
		id := p.onlyRun()
		dry := p.ctl("", "process", "--dry-run")
		contains(t, "dry run", dry.stdout, "(queued as "+id+", resumes)")
		mustCode(t, p.ctl("", "process"), 0)
		if runs := p.runs(); len(runs) != 1 {
			t.Errorf("runs = %v, want the one message of the migration", runs)
		}
		if got := p.read(".decree/ran.txt"); got != id+" 1/1\n"+id+" 1/1\n" {
			t.Errorf("attempts run:\n%swant attempt 1 of %s twice", got, id)
		}
		if lines := strings.Count(p.read("out.txt"), "\n"); lines != 60 {
			t.Errorf("out.txt has %d lines, want 60", lines)
		}
	})
}

// TestNotReadyRoutineCaughtBeforeTheFirstAttempt: a routine whose
// pre-check fails (its AI tool is missing) is caught before the first
// attempt: `process` says why, with the pre-check's hint, and exits
// non-zero; nothing ran and nothing is dead-lettered. Once the tool is
// there, `process` runs the migration once.
func TestNotReadyRoutineCaughtBeforeTheFirstAttempt(t *testing.T) {
	testtool.Require(t, "bash")
	t.Parallel()
	p := newProject(t, binary, "max_retries: 3\ndefault_routine: develop\n")
	p.routine("develop", "", `if [ "${DECREE_PRE_CHECK:-}" = "true" ]; then
  [ -e .decree/tool-installed ] || { echo "the AI tool is not installed: install it with 'apt-get install the-tool'"; exit 1; }
  exit 0
fi
echo "$message_id $DECREE_ATTEMPT" >> .decree/ran.txt`)
	p.write(".decree/migrations/01-a.spec.md", "first\n")
	r := p.ctl("", "process")
	mustCode(t, r, 1)
	contains(t, "process", r.stderr, "not ready")
	contains(t, "process", r.stderr, "apt-get install the-tool")
	if p.exists(".decree/ran.txt") {
		t.Errorf("the routine ran: %s", p.read(".decree/ran.txt"))
	}
	if dead := p.messages(".decree/inbox/dead"); len(dead) != 0 {
		t.Errorf("dead = %v, want nothing dead-lettered", dead)
	}
	if q := p.messages(".decree/inbox"); len(q) != 1 {
		t.Errorf("inbox = %v, want the migration's message still queued", q)
	}
	p.write(".decree/tool-installed", "")
	mustCode(t, p.ctl("", "process"), 0)
	if got := strings.Fields(p.read(".decree/ran.txt")); len(got) != 2 || got[1] != "1" {
		t.Errorf("ran %v, want one first attempt", got)
	}
	contains(t, "processed.md", p.read(".decree/processed.md"), "01-a.spec.md")
}

// TestRefusedStepHaltsTheMessage: a message whose recorded state the loop
// cannot go on from (a running attempt state.json does not list) is not
// run, failed or dead-lettered: it stays in the inbox, and process ends
// saying where it stopped and how it got there.
func TestRefusedStepHaltsTheMessage(t *testing.T) {
	testtool.Require(t, "bash")
	t.Parallel()
	p := newProject(t, binary, baseConfig)
	p.routine("develop", "", `echo ran >> .decree/ran.txt`)
	const id = "2026010100000000-0"
	p.write(".decree/inbox/"+id+".md", "---\nid: "+id+"\nchain: \"2026010100000000\"\nseq: 0\ntype: task\n---\nwork\n")
	p.write(".decree/runs/"+id+"/message.md", "---\nid: "+id+"\n---\nwork\n")
	p.write(".decree/runs/"+id+"/manifest.json", `{"files": {}}`+"\n")
	p.write(".decree/runs/"+id+"/state.json", `{"message_id": "`+id+`", "file": "`+id+`.md", "routine": "develop", "max_attempts": 3,
  "attempts": [], "machine": {"id": "`+id+`", "state": "running", "max": 3, "attempt": 1},
  "history": ["checkpointed -> running(1/3)"]}`+"\n")
	r := p.ctl("", "process")
	mustCode(t, r, 1)
	contains(t, "process", r.stderr, "stopped in state running")
	contains(t, "process", r.stderr, "checkpointed -> running(1/3)")
	if p.exists(".decree/ran.txt") {
		t.Error("the routine ran")
	}
	if got := p.messages(".decree/inbox"); len(got) != 1 {
		t.Errorf("inbox = %v, want the message left in place", got)
	}
	if dead := p.messages(".decree/inbox/dead"); len(dead) != 0 {
		t.Errorf("dead = %v", dead)
	}
}

// TestCancelledAttemptIsFinished: cancelling a running message ends its
// attempt in the event log too (ATTEMPT_FINISHED after ATTEMPT_STARTED),
// so a client pairing starts and finishes never keeps it open.
func TestCancelledAttemptIsFinished(t *testing.T) {
	testtool.Require(t, "bash")
	t.Parallel()
	p := newProject(t, binary, baseConfig)
	p.routine("develop", "", `touch .decree/started; sleep 120`)
	p.write(".decree/inbox/slow.md", "take your time\n")
	startController(t, p)
	startWorker(t, p, "w1")
	testtool.WaitFor(t, 30*time.Second, "the routine to start", func() bool { return p.exists(".decree/started") })
	mustCode(t, p.ctl("", "cancel", "slow"), 0)
	var started, finished bool
	for _, line := range strings.Split(p.read(".decree/events.jsonl"), "\n") {
		switch {
		case strings.Contains(line, `"kind":"attempt_started"`):
			started = true
		case strings.Contains(line, `"kind":"attempt_finished"`) && started:
			finished = true
		}
	}
	if !started || !finished {
		t.Errorf("events: attempt started %v, finished after it %v; want both", started, finished)
	}
}
