package e2e

import (
	"encoding/json"
	"testing"

	"github.com/decreehq/decree/internal/testtool"
)

// A person in the loop (issue 27): a routine asks by writing
// DECREE_ASK_FILE and exiting 0; the message waits; a reply is recorded
// and the next attempt reads it.

// askRoutine asks once (leaving part of its work in the tree), and with a
// reply writes what it got. Every run is counted outside the tree.
const askRoutine = `echo "$message_id ${DECREE_REPLY:-none}" >> .decree/ran.txt
if [ -n "${DECREE_REPLY:-}" ]; then
  echo "answer=$DECREE_REPLY note=$(cd / && cat "${DECREE_REPLY_FILE:-/dev/null}")" > "answer-$message_id.txt"
  exit 0
fi
echo partial > "partial-$message_id.txt"
# The paths are absolute: they work from any directory.
(cd / && cat > "$DECREE_ASK_FILE") <<'J'
{"question": "Indent with tabs?", "options": {"yes": "use tabs", "no": "use spaces"}}
J`

// waitsJSON is `decreectl waits -o json`.
type waitsJSON struct {
	Waits []struct {
		ID           string `json:"id"`
		MessageID    string `json:"messageId"`
		Kind         string `json:"kind"`
		Question     string `json:"question"`
		ReplyCommand string `json:"replyCommand"`
		Options      []struct {
			Name    string `json:"name"`
			Meaning string `json:"meaning"`
		} `json:"options"`
	} `json:"waits"`
}

func (p *project) waits() waitsJSON {
	p.t.Helper()
	r := p.ctl("", "waits", "-o", "json")
	mustCode(p.t, r, 0)
	var w waitsJSON
	if err := json.Unmarshal([]byte(r.stdout), &w); err != nil {
		p.t.Fatalf("waits -o json: %v\n%s", err, r)
	}
	return w
}

// TestAskReplyNextAttemptReadsTheAnswer: run ends waiting (exit 3, the
// reply command printed), waits lists the question, the reply is
// recorded, a second answer and an unknown option are refused with
// nothing changed, and process runs the next attempt with the answer on
// the tree the asking attempt left.
func TestAskReplyNextAttemptReadsTheAnswer(t *testing.T) {
	testtool.Require(t, "bash")
	t.Parallel()
	for _, m := range modes {
		t.Run(string(m), func(t *testing.T) {
			t.Parallel()
			p := newProject(t, m, "max_retries: 1\ndefault_routine: develop\n")
			p.routine("develop", "", askRoutine)
			r := p.ctl("", "run", "-m", "work", "-p", "x")
			mustCode(t, r, 3)
			id := p.onlyRun()
			wid := id + "-w1"
			contains(t, "run's output", r.stderr, "decreectl reply "+wid+" OPTION")
			contains(t, "run's output", r.stderr, "Indent with tabs?")
			w := p.waits()
			if len(w.Waits) != 1 || w.Waits[0].ID != wid || w.Waits[0].Kind != "ask" || w.Waits[0].Question != "Indent with tabs?" ||
				len(w.Waits[0].Options) != 2 || w.Waits[0].Options[0].Name != "yes" || w.Waits[0].Options[1].Meaning != "use spaces" {
				t.Fatalf("waits = %+v", w)
			}
			st := p.ctl("", "status")
			contains(t, "status", st.stdout, "1 waiting for a reply")
			if got := p.messages(".decree/inbox"); len(got) != 1 {
				t.Fatalf("inbox = %v, want the waiting message", got)
			}
			// Refused replies change nothing.
			before := p.read(".decree/runs/" + id + "/state.json")
			mustCode(t, p.ctl("", "reply", wid, "maybe"), 2)
			mustCode(t, p.ctl("", "reply", id+"-w7", "yes"), 4)
			if p.read(".decree/runs/"+id+"/state.json") != before {
				t.Errorf("a refused reply changed state.json")
			}
			contains(t, "refused replies", p.read(".decree/runs/"+id+"/replies-refused.jsonl"), `"option":"maybe"`)
			mustCode(t, p.ctl("", "reply", wid, "yes", "-m", "tabs please"), 0)
			dup := p.ctl("", "reply", wid, "no")
			mustCode(t, dup, 5)
			contains(t, "duplicate reply", dup.stderr, "already answered")
			if got := p.waits(); len(got.Waits) != 0 {
				t.Errorf("waits after the reply = %+v", got)
			}
			mustCode(t, p.ctl("", "process"), 0)
			if got := p.read("answer-" + id + ".txt"); got != "answer=yes note=tabs please\n" {
				t.Errorf("answer = %q", got)
			}
			contains(t, "the asking attempt's work", p.read("partial-"+id+".txt"), "partial")
			if got := p.read(".decree/ran.txt"); got != id+" none\n"+id+" yes\n" {
				t.Errorf("attempts:\n%s", got)
			}
			rec := p.read(".decree/runs/" + id + "/wait-001.json")
			contains(t, "wait record", rec, `"question": "Indent with tabs?"`)
			contains(t, "wait record", rec, `"option": "yes"`)
			if got := p.messages(".decree/inbox/done"); len(got) != 1 {
				t.Errorf("done = %v", got)
			}
			// Replies to a finished message are refused.
			mustCode(t, p.ctl("", "reply", id, "no"), 4)
		})
	}
}

// TestAskMalformedQuestionFailsTheAttempt: a question file that is not
// valid fails the attempt by the retry rules with an error saying what is
// wrong; nothing waits.
func TestAskMalformedQuestionFailsTheAttempt(t *testing.T) {
	testtool.Require(t, "bash")
	t.Parallel()
	p := newProject(t, binary, "max_retries: 1\ndefault_routine: develop\n")
	p.routine("develop", "", `echo '{"question": "Tabs?", "options": ["yes", "no"]}' > "$DECREE_ASK_FILE"`)
	r := p.ctl("", "run", "-m", "work", "-p", "x")
	mustCode(t, r, 1)
	contains(t, "run's output", r.stderr, "is not valid")
	contains(t, "run's output", r.stderr, "must be an object")
	if w := p.waits(); len(w.Waits) != 0 {
		t.Errorf("waits = %+v", w)
	}
	if dead := p.messages(".decree/inbox/dead"); len(dead) != 1 {
		t.Errorf("dead = %v", dead)
	}
}

// TestAskWaitingMigrationBlocksLaterOnes: process stops at a migration
// that waits (exit 3, the wait listed); after the reply the next process
// finishes it and only then runs the later migration.
func TestAskWaitingMigrationBlocksLaterOnes(t *testing.T) {
	testtool.Require(t, "bash")
	t.Parallel()
	p := newProject(t, binary, "max_retries: 1\ndefault_routine: develop\n")
	p.routine("develop", "", `name=$(basename "$spec_file" .spec.md)
echo "$name ${DECREE_REPLY:-none}" >> .decree/ran.txt
if [ "$name" = 01-asks ] && [ -z "${DECREE_REPLY:-}" ]; then
  echo '{"question": "Which database?", "options": {"pg": "PostgreSQL", "lite": "SQLite"}}' > "$DECREE_ASK_FILE"
fi`)
	p.write(".decree/migrations/01-asks.spec.md", "first\n")
	p.write(".decree/migrations/02-later.spec.md", "second\n")
	r := p.ctl("", "process")
	mustCode(t, r, 3)
	contains(t, "process output", r.stderr, "Which database?")
	if got := p.read(".decree/ran.txt"); got != "01-asks none\n" {
		t.Fatalf("ran:\n%s\n%s", got, r)
	}
	id := p.onlyRun()
	mustCode(t, p.ctl("", "reply", id, "lite"), 0)
	mustCode(t, p.ctl("", "process"), 0)
	if got := p.read(".decree/ran.txt"); got != "01-asks none\n01-asks lite\n02-later none\n" {
		t.Errorf("ran:\n%s", got)
	}
	contains(t, "processed.md", p.read(".decree/processed.md"), "02-later.spec.md")
}

// TestAskCancelWhileWaiting: cancelling a waiting message reverts the
// asking attempt's change, dead-letters it, and later replies are refused.
func TestAskCancelWhileWaiting(t *testing.T) {
	testtool.Require(t, "bash")
	t.Parallel()
	p := newProject(t, binary, "max_retries: 1\ndefault_routine: develop\n")
	p.routine("develop", "", askRoutine)
	before := p.tree()
	mustCode(t, p.ctl("", "run", "-m", "work", "-p", "x"), 3)
	id := p.onlyRun()
	mustCode(t, p.ctl("", "cancel", id), 0)
	p.sameTree(before)
	if w := p.waits(); len(w.Waits) != 0 {
		t.Errorf("waits = %+v", w)
	}
	mustCode(t, p.ctl("", "reply", id+"-w1", "yes"), 4)
	if dead := p.messages(".decree/inbox/dead"); len(dead) != 1 {
		t.Errorf("dead = %v", dead)
	}
}
