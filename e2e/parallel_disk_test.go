package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/decreehq/decree/internal/testtool"
)

// TestParallelDiskFullDuringMerge: the project's disk fills up just before
// a chain's merge writes a 6 MB file. The merge fails and waits (a warning
// says so), nothing is lost: its journal and lane stay, and once space is
// freed the merge completes by itself, every message having run once.
func TestParallelDiskFullDuringMerge(t *testing.T) {
	t.Parallel()
	testtool.Require(t, "bash")
	dir := testtool.MountTmpfs(t, "64m")
	p := newProjectIn(t, dir, binary, baseConfig+"parallel: 2\nhooks:\n  beforeMerge: hold\n")
	ledger := filepath.Join(t.TempDir(), "ledger.txt")
	if err := os.WriteFile(ledger, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	p.routine("develop", "", strings.ReplaceAll(laneRoutine, "$LEDGER", ledger))
	p.routine("hold", "", fmt.Sprintf(`for i in $(seq 1200); do [ -e %q ] && exit 0; sleep 0.05; done; exit 1`, ledger+".merge"))
	p.write(".gitignore", "filler.bin\n")
	p.write("shared.txt", "line one\nline two\nline three\n")
	e := &lanesEnv{p: p, ledger: ledger}
	e.ctrl = startController(t, p, "--min-free-bytes", "1048576")
	e.startWorker(t, "r1")
	e.startWorker(t, "r2")
	e.waitWorkers(t, 2)
	p.write(".decree/inbox/d.md", "file=d big=yes\n")
	testtool.WaitFor(t, 60*time.Second, "the chain to be done", func() bool { return len(p.messages(".decree/inbox/done")) == 3 })
	d := chainOf(e.started(t, "d", 0))

	// Leave about 3 MiB free: above the pause threshold, below the merge.
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	filler := p.path("filler.bin")
	if err := os.WriteFile(filler, make([]byte, int64(st.Bavail)*int64(st.Bsize)-3<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(ledger+".merge", nil, 0o644); err != nil {
		t.Fatal(err)
	}
	testtool.WaitFor(t, 60*time.Second, "the merge to fail for space", func() bool {
		return strings.Contains(p.read(".decree/events.jsonl"), "merging chain "+d+" into the project tree failed")
	})
	if !p.exists(".decree/lanes/" + d + "/merge.json") {
		t.Fatal("the lane's merge journal is gone after a failed merge")
	}
	if m := e.mergeOf(t, d+"-0"); m != nil {
		t.Errorf("merge recorded while it failed: %v", m)
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	e.waitIdle(t, 3)
	e.exactlyOnce(t, 3)
	if fi, err := os.Stat(p.path("out/d-big.bin")); err != nil || fi.Size() != 6000000 {
		t.Fatalf("out/d-big.bin after the merge: %v %v", fi, err)
	}
	if got := p.read("out/d.txt"); got != ids(d) {
		t.Logf("run.json: %s", p.read(".decree/runs/"+d+"-2/run.json"))
		t.Errorf("out/d.txt = %q", got)
	}
	if m := e.mergeOf(t, d+"-2"); m == nil || m["result"] != "merged" {
		t.Errorf("merge of %s-2 = %v", d, m)
	}
}
