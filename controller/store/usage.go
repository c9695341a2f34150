package store

import (
	"fmt"

	"github.com/decreehq/decree/pkg/usage"
)

// SetUsage records what the message's AI calls cost: per attempt
// (perAttempt[k-1] is attempt k; attempts beyond the slice keep theirs),
// the total, and the budget that applies (0: none). It is informational
// and can always be computed again from the usage files.
func (r *Run) SetUsage(perAttempt []usage.Totals, total usage.Totals, budget float64) error {
	return r.Update(func(st *RunState) error {
		if len(perAttempt) > len(st.Attempts) {
			return fmt.Errorf("run %s: usage of %d attempts, but %d recorded", r.id, len(perAttempt), len(st.Attempts))
		}
		for i, t := range perAttempt {
			if t.IsZero() {
				st.Attempts[i].Usage = nil
				continue
			}
			t := t
			st.Attempts[i].Usage = &t
		}
		st.Usage = nil
		if !total.IsZero() {
			st.Usage = &total
		}
		st.MaxCostUSD = budget
		return nil
	})
}
