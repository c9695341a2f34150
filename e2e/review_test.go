package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/decreehq/decree/internal/testtool"
)

// The review gate (issue 27): with review: true a successful attempt waits
// for approve, reject or retry before its follow-ups are collected.

// reviewedRoutine changes the tree, keeps what the failure context said,
// and writes a follow-up (run by the plain routine) to the outbox.
const reviewedRoutine = `echo "$message_id $DECREE_ATTEMPT ${DECREE_REPLY:-none}" >> .decree/ran.txt
echo "change $DECREE_ATTEMPT" >> work.txt
echo "new $DECREE_ATTEMPT" > "new-$DECREE_ATTEMPT.txt"
echo "edited" > keep.txt
if [ -f "$message_dir/failure-context.md" ]; then cp "$message_dir/failure-context.md" ".decree/fc-$DECREE_ATTEMPT.txt"; fi
printf -- '---\nroutine: plain\n---\nfollow\n' > .decree/outbox/next.md`

func reviewProject(t *testing.T, m mode) *project {
	p := newProject(t, m, "max_retries: 1\ndefault_routine: develop\nroutines:\n  develop:\n    review: true\n")
	p.routine("develop", "", reviewedRoutine)
	p.routine("plain", "", `echo "$message_id" >> .decree/plain.txt`)
	p.write("keep.txt", "kept\n")
	return p
}

// TestReviewApprove: the change waits with its follow-up held back, diff
// shows it, approve queues the follow-up and finishes the message.
func TestReviewApprove(t *testing.T) {
	testtool.Require(t, "bash")
	t.Parallel()
	p := reviewProject(t, binary)
	mustCode(t, p.ctl("", "run", "-m", "work", "-p", "x"), 3)
	id := p.onlyRun()
	w := p.waits()
	if len(w.Waits) != 1 || w.Waits[0].Kind != "review" || len(w.Waits[0].Options) != 3 {
		t.Fatalf("waits = %+v", w)
	}
	if p.exists(".decree/plain.txt") || len(p.list(".decree/outbox")) != 0 {
		t.Fatalf("the follow-up was not held back: plain ran or the outbox has %v", p.list(".decree/outbox"))
	}
	diff := p.ctl("", "diff", id)
	mustCode(t, diff, 0)
	contains(t, "diff", diff.stdout, "+change 1")
	mustCode(t, p.ctl("", "reply", id, "approve"), 0)
	mustCode(t, p.ctl("", "process"), 0)
	if got := p.messages(".decree/inbox/done"); len(got) != 2 {
		t.Errorf("done = %v, want the message and its follow-up", got)
	}
	contains(t, "plain.txt", p.read(".decree/plain.txt"), "-1")
	contains(t, "work.txt", p.read("work.txt"), "change 1")
}

// TestReviewReject: reject reverts the tree exactly to the checkpoint and
// dead-letters the message with the reviewer's note; the follow-up never
// runs.
func TestReviewReject(t *testing.T) {
	testtool.Require(t, "bash")
	t.Parallel()
	p := reviewProject(t, binary)
	before := p.tree()
	mustCode(t, p.ctl("", "run", "-m", "work", "-p", "x"), 3)
	id := p.onlyRun()
	if p.tree()["work.txt"] == "" {
		t.Fatal("the attempt's change is not in the tree while it waits for review")
	}
	mustCode(t, p.ctl("", "reply", id+"-w1", "reject", "-m", "not like this"), 0)
	mustCode(t, p.ctl("", "process"), 1)
	p.sameTree(before)
	dead := p.messages(".decree/inbox/dead")
	if len(dead) != 1 {
		t.Fatalf("dead = %v", dead)
	}
	note := p.read(".decree/inbox/dead/" + dead[0] + ".dead.txt")
	contains(t, "dead note", note, "Rejected")
	contains(t, "dead note", note, "not like this")
	if p.exists(".decree/plain.txt") {
		t.Error("the rejected change's follow-up ran")
	}
	if got := p.messages(".decree/inbox"); len(got) != 0 {
		t.Errorf("inbox = %v", got)
	}
}

// TestReviewRetry: retry runs another attempt (even past max_retries) with
// the note in its failure context; that attempt waits for review again.
func TestReviewRetry(t *testing.T) {
	testtool.Require(t, "bash")
	t.Parallel()
	p := reviewProject(t, binary)
	mustCode(t, p.ctl("", "run", "-m", "work", "-p", "x"), 3)
	id := p.onlyRun()
	mustCode(t, p.ctl("", "reply", id, "retry", "-m", "use more lines"), 0)
	mustCode(t, p.ctl("", "process"), 3)
	contains(t, "failure context of attempt 2", p.read(".decree/fc-2.txt"), "use more lines")
	if got := p.read(".decree/ran.txt"); got != id+" 1 none\n"+id+" 2 retry\n" {
		t.Errorf("attempts:\n%s", got)
	}
	w := p.waits()
	if len(w.Waits) != 1 || w.Waits[0].ID != id+"-w2" {
		t.Fatalf("waits = %+v, want the second review", w)
	}
	mustCode(t, p.ctl("", "reply", id+"-w1", "approve"), 5) // the first review is answered
	mustCode(t, p.ctl("", "reply", id+"-w2", "approve"), 0)
	mustCode(t, p.ctl("", "process"), 0)
	if got := strings.Count(p.read("work.txt"), "change"); got != 2 {
		t.Errorf("work.txt has %d changes, want 2 (the retry builds on the reviewed tree)", got)
	}
	if got := p.messages(".decree/inbox/done"); len(got) != 2 {
		t.Errorf("done = %v", got)
	}
}

// TestReviewApproveWithOtherChainsQueued: while a review waits, another
// chain queues a follow-up that then waits itself; approving the review
// collects only the reviewed attempt's follow-up, never the other chain's
// queued message (the inbox is looked at afresh at the approval).
func TestReviewApproveWithOtherChainsQueued(t *testing.T) {
	testtool.Require(t, "bash")
	t.Parallel()
	p := newProject(t, binary, "max_retries: 1\ndefault_routine: plain\nroutines:\n  reviewed:\n    review: true\n")
	p.routine("reviewed", "", `echo reviewed > reviewed.txt
printf -- '---\nroutine: plain\n---\nafter review\n' > .decree/outbox/next.md`)
	p.routine("chainer", "", `printf -- '---\nroutine: asker\n---\nask later\n' > .decree/outbox/next.md`)
	p.routine("asker", "", askRoutine)
	p.routine("plain", "", `echo "$message_id" >> .decree/plain.txt`)
	startController(t, p)
	startWorker(t, p, "w1")
	p.write(".decree/inbox/a.md", "---\nroutine: reviewed\n---\nreview me\n")
	testtool.WaitFor(t, 30*time.Second, "the review to wait", func() bool { return len(p.waits().Waits) == 1 })
	a := p.waits().Waits[0]
	p.write(".decree/inbox/b.md", "---\nroutine: chainer\n---\nchain on\n")
	testtool.WaitFor(t, 30*time.Second, "the other chain's follow-up to wait", func() bool { return len(p.waits().Waits) == 2 })
	mustCode(t, p.ctl("", "reply", a.ID, "approve"), 0)
	testtool.WaitFor(t, 30*time.Second, "the approved follow-up to run", func() bool { return p.exists(".decree/plain.txt") })
	if dead := p.messages(".decree/inbox/dead"); len(dead) != 0 {
		t.Fatalf("dead = %v: %s", dead, p.read(".decree/inbox/dead/"+dead[0]+".dead.txt"))
	}
	w := p.waits()
	if len(w.Waits) != 1 || w.Waits[0].Kind != "ask" {
		t.Fatalf("waits = %+v, want the other chain's question", w)
	}
	if !strings.HasPrefix(strings.TrimSpace(p.read(".decree/plain.txt")), a.MessageID[:16]+"-1") {
		t.Errorf("plain ran %q, want the reviewed chain's follow-up", p.read(".decree/plain.txt"))
	}
}
