package e2e

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/decreehq/decree/internal/testtool"
)

// TestKillDuringLogCut: a log over max_log_bytes is cut to its tail in
// the background after its attempt ended, while the run is filed. decreectl
// killed (-9) in the middle of that cut, after the message was done,
// leaves the cut's temporary file in the run directory; the next command
// removes it (the run stays in the open-run registry until its logs are
// ended), the message stays done once and the log keeps its last line.
//
// The routine prints about 9 KB: over the 4 KiB limit, under the four
// times the limit at which a live log is cut in the background, so the
// cut at the attempt's end is the one that copies (and is killed).
func TestKillDuringLogCut(t *testing.T) {
	testtool.Require(t, "bash")
	t.Parallel()
	p := newProject(t, binary, "max_retries: 1\ndefault_routine: develop\nmax_log_bytes: 4KiB\n")
	p.routine("develop", "", `echo "$message_id" >> .decree/ran.txt
for i in $(seq 1 300); do echo "output line $i of the routine"; done`)
	cmd := exec.Command(bin(t, "decreectl"), "-C", p.dir, "run", "-q", "-m", "loud", "-p", "x")
	cmd.Dir = p.dir
	cmd.Env = append(os.Environ(), "DECREE_CONTROLLER=", "DECREE_FAULT=log-cut-copied")
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != -1 {
		t.Fatalf("decreectl was not killed at the fault point: %v\n%s", err, out)
	}
	id := p.onlyRun()
	leftover := func() []string {
		var tmp []string
		for _, n := range p.list(".decree/runs/" + id) {
			if strings.Contains(n, ".tmp-") {
				tmp = append(tmp, n)
			}
		}
		return tmp
	}
	if len(leftover()) == 0 {
		t.Fatalf("no temporary file of the cut in the run directory: the kill did not come during the cut (%v)", p.list(".decree/runs/"+id))
	}
	if got := p.messages(".decree/inbox/done"); len(got) != 1 {
		t.Fatalf("done = %v before the kill, want the message filed (the cut runs after the run finished)", got)
	}
	r := p.ctl("", "process")
	mustCode(t, r, 0)
	if tmp := leftover(); len(tmp) != 0 {
		t.Errorf("temporary files left in the run directory after the next start: %v", tmp)
	}
	if ran := strings.Count(p.read(".decree/ran.txt"), id); ran != 1 {
		t.Errorf("the routine ran %d times, want once", ran)
	}
	if got := p.messages(".decree/inbox/done"); len(got) != 1 {
		t.Errorf("done = %v, want the message once", got)
	}
	contains(t, "log", p.read(".decree/runs/"+id+"/routine.log"), "output line 300 of the routine\n")
	if rj := p.runJSON(id); rj.Outcome != "succeeded" {
		t.Errorf("outcome %q, want succeeded", rj.Outcome)
	}
}
