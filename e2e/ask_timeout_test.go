package e2e

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/decreehq/decree/internal/testtool"
)

// timeoutRoutine asks with a deadline (one second unless the project's
// ask-timeout file says otherwise); told timed_out it says
// so and succeeds.
const timeoutRoutine = `ASK_TIMEOUT=$(cat .decree/ask-timeout 2>/dev/null || echo 1s)
echo "$message_id $DECREE_ATTEMPT ${DECREE_REPLY:-none}" >> .decree/ran.txt
if [ "${DECREE_REPLY:-}" = timed_out ]; then echo "no answer, went on" > result.txt; exit 0; fi
echo '{"question": "Deploy?", "options": {"yes": "deploy", "no": "hold"}, "timeout": "'"${ASK_TIMEOUT:-1s}"'"}' > "$DECREE_ASK_FILE"`

// TestAskTimeout: a wait whose deadline passes takes the reserved outcome
// timed_out. With one attempt the message is dead-lettered by the retry
// rules with a note saying no reply came; with two, the next attempt
// sees DECREE_REPLY=timed_out and may route on it. A reply after the
// deadline is refused.
func TestAskTimeout(t *testing.T) {
	testtool.Require(t, "bash")
	t.Parallel()
	t.Run("exhausted", func(t *testing.T) {
		t.Parallel()
		p := newProject(t, binary, "max_retries: 1\ndefault_routine: develop\n")
		p.routine("develop", "", timeoutRoutine)
		p.write(".decree/ask-timeout", "3s") // long enough for run to end while it waits
		mustCode(t, p.ctl("", "run", "-m", "work", "-p", "x"), 3)
		id := p.onlyRun()
		var rec struct {
			Deadline time.Time `json:"deadline"`
		}
		if err := json.Unmarshal([]byte(p.read(".decree/runs/"+id+"/wait-001.json")), &rec); err != nil || rec.Deadline.IsZero() {
			t.Fatalf("wait record: %v %+v", err, rec)
		}
		testtool.WaitFor(t, 10*time.Second, "the wait's deadline to pass", func() bool { return time.Now().After(rec.Deadline) })
		r := p.ctl("", "process")
		mustCode(t, r, 1)
		dead := p.messages(".decree/inbox/dead")
		if len(dead) != 1 {
			t.Fatalf("dead = %v\n%s", dead, r)
		}
		contains(t, "dead note", p.read(".decree/inbox/dead/"+dead[0]+".dead.txt"), "no reply came to wait "+id+"-w1")
		late := p.ctl("", "reply", id+"-w1", "yes")
		mustCode(t, late, 4)
		contains(t, "late reply", late.stderr, "timed out")
		if p.exists("result.txt") {
			t.Error("an attempt ran after the last one timed out")
		}
	})
	t.Run("routed", func(t *testing.T) {
		t.Parallel()
		p := newProject(t, binary, "max_retries: 2\ndefault_routine: develop\n")
		p.routine("develop", "", timeoutRoutine)
		ctl := startController(t, p)
		startWorker(t, p, "w1")
		p.write(".decree/inbox/deploy.md", "deploy it\n")
		testtool.WaitFor(t, 30*time.Second, "the message to be done", func() bool { return len(p.messages(".decree/inbox/done")) == 1 })
		id := p.onlyRun()
		if got := p.read(".decree/ran.txt"); got != id+" 1 none\n"+id+" 2 timed_out\n" {
			t.Errorf("attempts:\n%s", got)
		}
		contains(t, "result.txt", p.read("result.txt"), "no answer")
		contains(t, "events", p.read(".decree/events.jsonl"), `"kind":"timed_out"`)
		_ = ctl
	})
}
