package store

import (
	"fmt"
	"reflect"

	"github.com/decreehq/decree/pkg/usage"
)

// SetUsage records what the message's AI calls cost: per attempt
// (perAttempt[k-1] is attempt k; attempts beyond the slice keep theirs),
// the total, and the budget that applies (0: none). It is informational
// and can always be computed again from the usage files.
func (r *Run) SetUsage(perAttempt []usage.Totals, total usage.Totals, budget float64) error {
	if r.usageIs(perAttempt, total, budget) {
		return nil // recorded already: no write (filing sets it again)
	}
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

// usageIs reports whether the state records exactly this usage.
func (r *Run) usageIs(perAttempt []usage.Totals, total usage.Totals, budget float64) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	st := &r.state
	if len(perAttempt) > len(st.Attempts) || st.MaxCostUSD != budget || !sameTotals(st.Usage, total) {
		return false
	}
	for i, t := range perAttempt {
		if !sameTotals(st.Attempts[i].Usage, t) {
			return false
		}
	}
	return true
}

// sameTotals reports whether a recorded usage (nil for none) is t.
func sameTotals(rec *usage.Totals, t usage.Totals) bool {
	if rec == nil {
		return t.IsZero()
	}
	return reflect.DeepEqual(*rec, t)
}
