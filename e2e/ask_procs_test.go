package e2e

import (
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/decreehq/decree/internal/testtool"
)

// Waits with a separate controller and worker (issue 27).

// TestAskWaitingChainDoesNotBlockAnother: while one chain waits for a
// reply, a message queued after it runs to the end; a hand-written inbox
// reply (to:, option:) then resumes the waiting one; onWait told about
// the wait; a malformed reply file is dead-lettered and changes nothing.
func TestAskWaitingChainDoesNotBlockAnother(t *testing.T) {
	testtool.Require(t, "bash")
	t.Parallel()
	p := newProject(t, binary, "max_retries: 1\ndefault_routine: develop\nhooks:\n  onWait: notify\n")
	p.routine("develop", "", askRoutine)
	p.routine("plain", "", `echo "$message_id" >> .decree/plain.txt`)
	p.routine("notify", "", `echo "$DECREE_WAIT_ID|$DECREE_QUESTION|$DECREE_OPTIONS|$DECREE_REPLY_COMMAND" >> .decree/notified.txt`)
	startController(t, p)
	startWorker(t, p, "w1")
	p.write(".decree/inbox/asks.md", "ask me\n")
	testtool.WaitFor(t, 30*time.Second, "the first message to wait", func() bool { return p.exists(".decree/notified.txt") })
	id := p.onlyRun()
	wid := id + "-w1"
	if got := p.read(".decree/notified.txt"); got != wid+"|Indent with tabs?|yes,no|decreectl reply "+wid+" OPTION [-m NOTE]\n" {
		t.Errorf("onWait was told %q", got)
	}
	p.write(".decree/inbox/other.md", "---\nroutine: plain\n---\nsomething else\n")
	testtool.WaitFor(t, 30*time.Second, "the other chain to finish", func() bool { return p.exists(".decree/plain.txt") })
	if w := p.waits(); len(w.Waits) != 1 || w.Waits[0].ID != wid {
		t.Fatalf("waits = %+v", w)
	}
	stateBefore := p.read(".decree/runs/" + id + "/state.json")
	p.write(".decree/inbox/bad-reply.md", "---\nto: "+wid+"\noption: perhaps\n---\n")
	testtool.WaitFor(t, 30*time.Second, "the bad reply to be refused", func() bool { return len(p.messages(".decree/inbox/dead")) == 1 })
	contains(t, "refused reply note", p.read(".decree/inbox/dead/bad-reply.md.dead.txt"), "unknown option")
	if got := p.read(".decree/runs/" + id + "/state.json"); got != stateBefore {
		t.Errorf("a refused reply changed the waiting message's state")
	}
	p.write(".decree/inbox/reply.md", "---\nto: "+wid+"\noption: no\n---\nspaces, two of them\n")
	testtool.WaitFor(t, 30*time.Second, "the answered message to finish", func() bool { return p.exists("answer-" + id + ".txt") })
	testtool.WaitFor(t, 30*time.Second, "everything to be filed", func() bool { return len(p.messages(".decree/inbox")) == 0 })
	if got := p.read("answer-" + id + ".txt"); got != "answer=no note=spaces, two of them\n" {
		t.Errorf("answer = %q", got)
	}
	if got := p.messages(".decree/inbox/done"); len(got) != 3 {
		t.Errorf("done = %v, want the two messages and the reply", got)
	}
	ev := p.read(".decree/events.jsonl")
	for _, kind := range []string{`"kind":"waiting"`, `"kind":"replied"`} {
		if strings.Count(ev, kind) != 1 {
			t.Errorf("events: %s %d times, want once", kind, strings.Count(ev, kind))
		}
	}
}

// TestAskSurvivesControllerKill: the controller is killed (SIGKILL) while
// a message waits, and again right after a reply was acknowledged; the
// wait is found again, the reply is neither lost nor applied twice, and the
// message finishes with one question asked.
func TestAskSurvivesControllerKill(t *testing.T) {
	testtool.Require(t, "bash")
	t.Parallel()
	p := newProject(t, binary, "max_retries: 3\ndefault_routine: develop\n")
	p.routine("develop", "", askRoutine)
	ctl := startController(t, p)
	startWorker(t, p, "w1")
	p.write(".decree/inbox/asks.md", "ask me\n")
	testtool.WaitFor(t, 30*time.Second, "the message to wait", func() bool { return strings.Contains(p.read(".decree/events.jsonl"), `"kind":"waiting"`) })
	id := p.onlyRun()
	ctl.Signal(syscall.SIGKILL)
	ctl.Wait(t, 20*time.Second)
	ctl = startController(t, p)
	startWorker(t, p, "w2")
	if w := p.waits(); len(w.Waits) != 1 || w.Waits[0].ID != id+"-w1" {
		t.Fatalf("waits after the restart = %+v", w)
	}
	mustCode(t, p.ctl("", "reply", id, "yes", "-m", "go", "--request-id", "r-1"), 0)
	ctl.Signal(syscall.SIGKILL) // while the reply is being delivered
	ctl.Wait(t, 20*time.Second)
	// The same request again is acknowledged or, once delivered, found
	// answered: never a second answer.
	startController(t, p)
	mustCode(t, p.ctl("", "reply", id, "yes", "-m", "go", "--request-id", "r-1"), 0)
	mustCode(t, p.ctl("", "reply", id+"-w1", "yes", "-m", "go", "--request-id", "r-2"), 5)
	startWorker(t, p, "w3")
	testtool.WaitFor(t, 60*time.Second, "the message to be done", func() bool { return len(p.messages(".decree/inbox/done")) == 1 })
	ran := p.read(".decree/ran.txt")
	if strings.Count(ran, id+" none\n") != 1 || strings.Count(ran, id+" yes\n") < 1 || strings.Count(ran, "\n") != strings.Count(ran, id+" ") {
		t.Errorf("attempts:\n%swant one question and then only answered attempts", ran)
	}
	if got := p.read("answer-" + id + ".txt"); got != "answer=yes note=go\n" {
		t.Errorf("answer = %q", got)
	}
	rec := p.read(".decree/runs/" + id + "/wait-001.json")
	if strings.Count(rec, `"option": "yes"`) != 1 || p.exists(".decree/runs/"+id+"/wait-002.json") {
		t.Errorf("wait records: %s", rec)
	}
	mustCode(t, p.ctl("", "reply", id+"-w1", "no"), 5) // a duplicate: that wait was answered
	mustCode(t, p.ctl("", "reply", id, "no"), 4)       // stale: the message is done
}

// TestAskReplicaWorker: a worker with its own replica of the tree returns
// the question file; the reply's note travels to the next attempt there,
// and its change comes back to the controller's tree.
func TestAskReplicaWorker(t *testing.T) {
	testtool.Require(t, "bash")
	t.Parallel()
	p := newProject(t, binary, "max_retries: 1\ndefault_routine: develop\n")
	p.routine("develop", "", askRoutine)
	startController(t, p)
	ws := t.TempDir()
	start(t, ws, "decree-worker", "--controller", "unix://"+p.path(".decree/decree.sock"), "--workspace", ws, "--id", "replica")
	p.write(".decree/inbox/asks.md", "ask me\n")
	testtool.WaitFor(t, 30*time.Second, "the message to wait", func() bool { return strings.Contains(p.read(".decree/events.jsonl"), `"kind":"waiting"`) })
	id := p.onlyRun()
	if w := p.waits(); len(w.Waits) != 1 || w.Waits[0].Question != "Indent with tabs?" {
		t.Fatalf("waits = %+v", w)
	}
	mustCode(t, p.ctl("", "reply", id, "yes", "-m", "from afar"), 0)
	testtool.WaitFor(t, 30*time.Second, "the message to be done", func() bool { return len(p.messages(".decree/inbox/done")) == 1 })
	if got := p.read("answer-" + id + ".txt"); got != "answer=yes note=from afar\n" {
		t.Errorf("answer = %q", got)
	}
	contains(t, "the asking attempt's work", p.read("partial-"+id+".txt"), "partial")
}
