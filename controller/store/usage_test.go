package store

import (
	"fmt"
	"testing"

	"github.com/decreehq/decree/pkg/message"
	"github.com/decreehq/decree/pkg/usage"
)

// run.json's chain_usage sums the earlier messages' recorded usage with
// this one's.
func TestChainUsageInRunJSON(t *testing.T) {
	st, err := Open(t.TempDir(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	const chain = "2026010100000000"
	for seq, cost := range []usage.Dollars{usage.FromFloat(0.25), 0, usage.FromFloat(0.5)} {
		m := &message.Message{HasFrontmatter: true, Body: []byte("x\n")}
		m.Set("chain", chain)
		m.Set("seq", seq)
		e, err := st.CreateMessage(fmt.Sprintf("m%d", seq), m)
		if err != nil {
			t.Fatal(err)
		}
		run, err := st.StartRun(RunStart{Entry: e, Routine: "develop", MaxAttempts: 1})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := run.BeginAttempt(); err != nil {
			t.Fatal(err)
		}
		if err := run.FinishAttempt(1, 0, ""); err != nil {
			t.Fatal(err)
		}
		if cost > 0 {
			tot := usage.Totals{CostUSD: cost, Calls: 1}
			if err := run.SetUsage([]usage.Totals{tot}, tot, 0); err != nil {
				t.Fatal(err)
			}
		}
		rec, err := run.Finish(OutcomeSucceeded)
		if err != nil {
			t.Fatal(err)
		}
		want := []float64{0.25, 0.25, 0.75}[seq]
		if rec.ChainUsage == nil || rec.ChainUsage.CostUSD.Float() != want {
			t.Errorf("seq %d: chain_usage %+v, want $%.2f", seq, rec.ChainUsage, want)
		}
	}
}
