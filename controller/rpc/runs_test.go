package rpc

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/decreehq/decree/controller/store"
	"github.com/decreehq/decree/pkg/layout"
	"github.com/decreehq/decree/pkg/message"
	decreev1 "github.com/decreehq/decree/proto/decree/v1"
)

// TestListRunsPagesFromIndex: `decreectl runs` pages through ListRuns 100
// at a time. With 11,000 runs, each page must read only its own runs'
// state (it read all 11,000 per page: 31-37 s in all); the whole listing
// comes in order, without gaps or repeats, and a chain filter pages too.
func TestListRunsPagesFromIndex(t *testing.T) {
	dir := t.TempDir()
	st, _, m := newDomain(t, dir, 0)
	defer m.Close()
	const n = 11000
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for i := 0; i < n; i++ {
		chain := t0.Add(time.Duration(i/2)*time.Second).Format("20060102150405") + "00"
		id := chain + "-" + []string{"0", "1"}[i%2]
		runDir := layout.Path(st.Root(), layout.Runs, id)
		if err := os.MkdirAll(runDir, 0o755); err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(store.RunState{MessageID: id, File: "m.md", Routine: "develop", MaxAttempts: 3,
			Started: t0, Outcome: store.OutcomeSucceeded, Ended: t0.Add(time.Second),
			Attempts: []store.AttemptState{{N: 1, Status: "succeeded", Start: t0, End: t0.Add(time.Second), LogName: "routine.log"}}})
		if err := os.WriteFile(filepath.Join(runDir, layout.StateFile), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	client := controllerClient(t, ControllerDeps{Store: st, Leases: m})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	list := func(chain string) ([]string, int) {
		var ids []string
		req := &decreev1.ListRunsRequest{Chain: chain}
		pages := 0
		for {
			resp, err := client.ListRuns(ctx, req)
			if err != nil {
				t.Fatal(err)
			}
			pages++
			for _, r := range resp.GetRuns() {
				ids = append(ids, r.GetMessageId())
			}
			if resp.GetNextPageToken() == "" {
				return ids, pages
			}
			req.PageToken = resp.GetNextPageToken()
		}
	}
	reads := st.RunReads()
	start := time.Now()
	ids, pages := list("")
	took := time.Since(start)
	t.Logf("%d runs in %d pages: %v, %d states read", len(ids), pages, took, st.RunReads()-reads)

	if len(ids) != n || pages != n/defaultPageSize {
		t.Fatalf("listed %d runs in %d pages, want %d in %d", len(ids), pages, n, n/defaultPageSize)
	}
	for i := 1; i < len(ids); i++ {
		if !message.IDLess(ids[i], ids[i-1]) {
			t.Fatalf("runs %d and %d out of order: %s then %s", i-1, i, ids[i-1], ids[i])
		}
	}
	if got := st.RunReads() - reads; got > n {
		t.Errorf("listing %d runs read %d run states; each page must read only its own", n, got)
	}
	// Generous for a loaded machine and the race detector; the old
	// quadratic listing took over 30 s.
	if took > 10*time.Second {
		t.Errorf("listing %d runs took %v", n, took)
	}
	chain := ids[4321][:16]
	if got, _ := list(chain); len(got) != 2 || got[0] != chain+"-1" || got[1] != chain+"-0" {
		t.Errorf("chain %s lists %v", chain, got)
	}
	// A new run shows up at once: the index follows runs/.
	newest := time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC).Format("20060102150405") + "00-0"
	if err := os.MkdirAll(layout.Path(st.Root(), layout.Runs, newest), 0o755); err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(store.RunState{MessageID: newest, File: "n.md", Started: t0})
	if err := os.WriteFile(layout.Path(st.Root(), layout.Runs, newest, layout.StateFile), b, 0o644); err != nil {
		t.Fatal(err)
	}
	resp, err := client.ListRuns(ctx, &decreev1.ListRunsRequest{PageSize: 1})
	if err != nil || len(resp.GetRuns()) != 1 || resp.GetRuns()[0].GetMessageId() != newest {
		t.Errorf("after a new run: %v %v", resp.GetRuns(), err)
	}
}
