package e2e

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/decreehq/decree/internal/testtool"
)

// TestRunLeavesHandDroppedFilesUntouched: inbox files without a chain id
// (dropped in by hand) are neither given one nor rewritten by `decreectl
// run`, which runs only its own chain; `process` then gives them ids and
// runs each once.
func TestRunLeavesHandDroppedFilesUntouched(t *testing.T) {
	testtool.Require(t, "bash")
	t.Parallel()
	p := newProject(t, binary, baseConfig)
	p.routine("develop", "", `echo "$message_id" >> .decree/ran.txt`)
	const n = 300
	before := map[string]os.FileInfo{}
	for i := range n {
		name := fmt.Sprintf(".decree/inbox/hand-%03d.md", i)
		p.write(name, fmt.Sprintf("task %d\n", i))
		fi, err := os.Stat(p.path(name))
		if err != nil {
			t.Fatal(err)
		}
		before[name] = fi
	}
	mustCode(t, p.ctl("", "run", "-m", "mine", "-p", "my task"), 0)
	if ran := strings.Fields(p.read(".decree/ran.txt")); len(ran) != 1 {
		t.Fatalf("run ran %d messages, want its own only", len(ran))
	}
	for name, fi := range before {
		now, err := os.Stat(p.path(name))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !now.ModTime().Equal(fi.ModTime()) || now.Size() != fi.Size() || !os.SameFile(now, fi) {
			t.Fatalf("%s was rewritten by run (size %d -> %d)", name, fi.Size(), now.Size())
		}
		if strings.Contains(p.read(name), "chain:") {
			t.Fatalf("%s was given a chain id by run", name)
		}
	}
	mustCode(t, p.ctl("", "process"), 0)
	if ran := strings.Fields(p.read(".decree/ran.txt")); len(ran) != n+1 {
		t.Errorf("after process %d messages ran, want %d:\n%s\ninbox %v\ndead %v", len(ran), n+1, dupes(ran), p.messages(".decree/inbox"), p.messages(".decree/inbox/dead"))
	}
	if got := p.messages(".decree/inbox/done"); len(got) != n+1 {
		t.Errorf("done has %d messages, want %d", len(got), n+1)
	}
}

// dupes lists the entries of ids that occur more than once.
func dupes(ids []string) string {
	seen := map[string]int{}
	for _, id := range ids {
		seen[id]++
	}
	var out []string
	for id, k := range seen {
		if k > 1 {
			out = append(out, fmt.Sprintf("%s x%d", id, k))
		}
	}
	return strings.Join(out, ", ")
}
