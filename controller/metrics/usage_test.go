package metrics

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/decreehq/decree/controller/events"
	"github.com/decreehq/decree/controller/store"
	"github.com/decreehq/decree/pkg/message"
	"github.com/decreehq/decree/pkg/usage"
)

// TestUsageCounters: a finished attempt's recorded usage feeds the cost
// and token counters by routine; an attempt without usage adds nothing.
func TestUsageCounters(t *testing.T) {
	st, err := store.Open(t.TempDir(), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	e, err := st.CreateMessage("m", &message.Message{Body: []byte("x\n")})
	if err != nil {
		t.Fatal(err)
	}
	run, err := st.StartRun(store.RunStart{Entry: e, Routine: "develop", MaxAttempts: 2})
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 2; i++ {
		if _, err := run.BeginAttempt(); err != nil {
			t.Fatal(err)
		}
		if err := run.FinishAttempt(i, 1, ""); err != nil {
			t.Fatal(err)
		}
	}
	a1 := usage.Totals{CostUSD: usage.FromFloat(0.4), InputTokens: 10, OutputTokens: 300, CacheReadTokens: 1000, Calls: 1}
	if err := run.SetUsage([]usage.Totals{a1, {}}, a1, 0); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	s := newEventSeries(reg)
	now := time.Now()
	for n := 1; n <= 2; n++ {
		s.observe(&events.Event{Kind: events.AttemptStarted, MessageID: e.ID, Attempt: n, Routine: "develop", Time: now}, st)
		s.observe(&events.Event{Kind: events.AttemptFinished, MessageID: e.ID, Attempt: n, ExitCode: 1, Time: now}, st)
	}
	value := func(c *prometheus.CounterVec, labels ...string) float64 {
		var m dto.Metric
		if err := c.WithLabelValues(labels...).Write(&m); err != nil {
			t.Fatal(err)
		}
		return m.GetCounter().GetValue()
	}
	if got := value(s.aiCost, "develop"); got != 0.4 {
		t.Errorf("cost %v, want 0.4", got)
	}
	if got := value(s.aiTokens, "develop", "output"); got != 300 {
		t.Errorf("output tokens %v, want 300", got)
	}
	if got := value(s.aiTokens, "develop", "cache_read"); got != 1000 {
		t.Errorf("cache read tokens %v, want 1000", got)
	}
}
