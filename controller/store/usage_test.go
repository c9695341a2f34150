package store

import (
	"fmt"
	"os"
	"syscall"
	"testing"

	"github.com/decreehq/decree/pkg/message"
	"github.com/decreehq/decree/pkg/usage"
)

// finishChainRun runs message seq of chain to success with one attempt
// that cost cost dollars (none when 0) and returns its chain_usage.
func finishChainRun(t *testing.T, st *Store, chain string, seq int, cost float64) *usage.Totals {
	t.Helper()
	m := &message.Message{HasFrontmatter: true, Body: []byte("x\n")}
	m.Set("chain", chain)
	m.Set("seq", seq)
	e, err := st.CreateMessage(fmt.Sprintf("m%d", seq), m)
	if err != nil {
		t.Fatal(err)
	}
	r, err := st.StartRun(RunStart{Entry: e, Routine: "develop", MaxAttempts: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.BeginAttempt(); err != nil {
		t.Fatal(err)
	}
	if err := r.FinishAttempt(1, 0, ""); err != nil {
		t.Fatal(err)
	}
	if cost > 0 {
		tot := usage.Totals{CostUSD: usage.FromFloat(cost), Calls: 1}
		if err := r.SetUsage([]usage.Totals{tot}, tot, 0); err != nil {
			t.Fatal(err)
		}
	}
	rec, err := r.Finish(OutcomeSucceeded)
	if err != nil {
		t.Fatal(err)
	}
	return rec.ChainUsage
}

// run.json's chain_usage sums the earlier messages' recorded usage with
// this one's.
func TestChainUsageInRunJSON(t *testing.T) {
	st, err := Open(t.TempDir(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	for seq, cost := range []float64{0.25, 0, 0.5} {
		got := finishChainRun(t, st, "2026010100000000", seq, cost)
		want := []float64{0.25, 0.25, 0.75}[seq]
		if got == nil || got.CostUSD.Float() != want {
			t.Errorf("seq %d: chain_usage %+v, want $%.2f", seq, got, want)
		}
	}
}

// chain_usage is read back from the latest finished earlier message, so a
// long chain costs one read per message; a message that never ran is
// stepped over.
func TestChainUsageReadsTheLatestFinishedRecord(t *testing.T) {
	root := t.TempDir()
	st, err := Open(root, Options{})
	if err != nil {
		t.Fatal(err)
	}
	const chain = "2026010100000000"
	run := func(seq int, cost float64) *usage.Totals { return finishChainRun(t, st, chain, seq, cost) }
	run(0, 0.25)
	run(1, 0)
	run(2, 0.5)
	// seq 3 never ran (refused before an attempt): no run.json.
	if got := run(4, 0.125); got == nil || got.CostUSD.Float() != 0.875 {
		t.Fatalf("seq 4: chain_usage %+v, want $0.875", got)
	}
	// With the first messages' records gone, seq 5 still sums everything
	// before it: it read seq 4's chain_usage, not each earlier record.
	for _, seq := range []int{0, 1, 2} {
		dir, err := st.RunDir(fmt.Sprintf("%s-%d", chain, seq))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.RemoveAll(dir); err != nil {
			t.Fatal(err)
		}
	}
	if got := run(5, 0.125); got == nil || got.CostUSD.Float() != 1 {
		t.Fatalf("seq 5: chain_usage %+v, want $1.00", got)
	}
}

// Setting the usage already recorded writes nothing; a different usage is
// written.
func TestSetUsageSameWritesNothing(t *testing.T) {
	st, err := Open(t.TempDir(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	e, err := st.CreateMessage("m", &message.Message{Body: []byte("x\n")})
	if err != nil {
		t.Fatal(err)
	}
	run, err := st.StartRun(RunStart{Entry: e, Routine: "develop", MaxAttempts: 2})
	if err != nil {
		t.Fatal(err)
	}
	for n := 1; n <= 2; n++ {
		if _, err := run.BeginAttempt(); err != nil {
			t.Fatal(err)
		}
		if err := run.FinishAttempt(n, 1, ""); err != nil {
			t.Fatal(err)
		}
	}
	statePath, err := run.Path("state.json")
	if err != nil {
		t.Fatal(err)
	}
	ino := func() uint64 {
		fi, err := os.Stat(statePath)
		if err != nil {
			t.Fatal(err)
		}
		return fi.Sys().(*syscall.Stat_t).Ino
	}
	one := usage.Totals{CostUSD: usage.FromFloat(0.5), Calls: 1}
	set := func(per []usage.Totals, total usage.Totals) {
		t.Helper()
		if err := run.SetUsage(per, total, 2); err != nil {
			t.Fatal(err)
		}
	}
	set([]usage.Totals{one}, one)
	before := ino()
	set([]usage.Totals{one}, one)
	if ino() != before {
		t.Error("the same usage was written again")
	}
	set([]usage.Totals{one, one}, usage.Totals{CostUSD: usage.FromFloat(1), Calls: 2})
	if ino() == before {
		t.Error("a new usage was not written")
	}
	if s := run.State(); s.Usage == nil || s.Usage.Calls != 2 || s.Attempts[1].Usage == nil {
		t.Errorf("state after the new usage: %+v", s)
	}
}
