package metrics

import (
	"github.com/decreehq/decree/controller/events"
	"github.com/decreehq/decree/controller/store"
)

// observeUsage adds what a finished attempt's AI calls cost (recorded in
// its run's state.json before the attempt's end is announced) to the cost
// and token counters.
func (s *eventSeries) observeUsage(st *store.Store, e *events.Event, routine string) {
	if st == nil || e.MessageID == "" || e.Attempt < 1 {
		return
	}
	run, err := st.OpenRun(e.MessageID)
	if err != nil {
		return
	}
	as := run.State().Attempts
	if e.Attempt > len(as) || as[e.Attempt-1].Usage == nil {
		return
	}
	u := as[e.Attempt-1].Usage
	s.aiCost.WithLabelValues(routine).Add(u.CostUSD.Float())
	for kind, n := range map[string]int64{"input": u.InputTokens, "output": u.OutputTokens, "cache_read": u.CacheReadTokens, "cache_write": u.CacheWriteTokens} {
		s.aiTokens.WithLabelValues(routine, kind).Add(float64(n))
	}
}
