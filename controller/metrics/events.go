package metrics

import (
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/decreehq/decree/controller/events"
	"github.com/decreehq/decree/controller/store"
)

// eventSeries are the counters and histograms that follow the event log.
// Starts of messages and attempts are remembered (by id, in memory only,
// never as labels) until their end is seen.
type eventSeries struct {
	events      *prometheus.CounterVec
	attempts    *prometheus.CounterVec
	duration    *prometheus.HistogramVec
	queueWait   prometheus.Histogram
	finished    *prometheus.CounterVec
	hooks       *prometheus.CounterVec
	limitWaits  prometheus.Counter
	limitSecs   prometheus.Counter
	warnings    prometheus.Counter
	processing  prometheus.Gauge
	attemptsNow prometheus.Gauge
	aiCost      *prometheus.CounterVec
	aiTokens    *prometheus.CounterVec

	mu       sync.Mutex
	queued   map[string]time.Time // message id -> queued event time
	started  map[attemptKey]attemptStart
	inFlight map[string]bool // messages started, not finished
}

type attemptKey struct {
	id string
	n  int
}

type attemptStart struct {
	at      time.Time
	routine string
}

// Buckets for attempt durations: routines run from seconds (a script) to
// an hour (an AI session).
var durationBuckets = []float64{1, 5, 15, 30, 60, 120, 300, 600, 1200, 1800, 3600, 7200}

// Buckets for queue waits: from sub-second to a day.
var waitBuckets = []float64{0.5, 1, 5, 15, 60, 300, 900, 1800, 3600, 4 * 3600, 12 * 3600, 24 * 3600}

func newEventSeries(reg prometheus.Registerer) *eventSeries {
	s := &eventSeries{
		events: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "decree_events_total",
			Help: "Events the controller recorded, by kind (the kinds of `decreectl watch`)."}, []string{"kind"}),
		attempts: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "decree_attempts_total",
			Help: "Finished attempts by routine and outcome: succeeded, failed, worker_lost, interrupted."}, []string{"routine", "outcome"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "decree_attempt_duration_seconds",
			Help: "Attempt durations (start to end, hooks and checkpoints included), by routine and outcome.", Buckets: durationBuckets}, []string{"routine", "outcome"}),
		queueWait: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "decree_queue_wait_seconds",
			Help: "Time from a message entering the inbox to its processing start.", Buckets: waitBuckets}),
		finished: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "decree_messages_finished_total",
			Help: "Messages finished: outcome done, or dead with the dead-letter reason."}, []string{"outcome", "reason"}),
		hooks: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "decree_hooks_total",
			Help: "Finished hook runs by outcome: ok or failed."}, []string{"outcome"}),
		limitWaits: prometheus.NewCounter(prometheus.CounterOpts{Name: "decree_usage_limit_waits_total",
			Help: "Waits for an AI tool's usage limit to reset (they never count as attempts)."}),
		limitSecs: prometheus.NewCounter(prometheus.CounterOpts{Name: "decree_usage_limit_wait_seconds_total",
			Help: "Seconds of usage-limit waits announced (from the event to the reset time)."}),
		warnings: prometheus.NewCounter(prometheus.CounterOpts{Name: "decree_warnings_total",
			Help: "Warnings the controller reported (a wait for a worker, a full disk, a failed afterEach hook, ...)."}),
		processing: prometheus.NewGauge(prometheus.GaugeOpts{Name: "decree_messages_processing",
			Help: "Messages being processed now (started and not yet done or dead)."}),
		attemptsNow: prometheus.NewGauge(prometheus.GaugeOpts{Name: "decree_attempts_running",
			Help: "Attempts started and not yet finished."}),
		aiCost: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "decree_ai_cost_usd_total",
			Help: "US dollars the AI calls of finished attempts cost (their usage files), by routine."}, []string{"routine"}),
		aiTokens: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "decree_ai_tokens_total",
			Help: "Tokens of the AI calls of finished attempts, by routine and kind: input, output, cache_read, cache_write."}, []string{"routine", "kind"}),
		queued:   map[string]time.Time{},
		started:  map[attemptKey]attemptStart{},
		inFlight: map[string]bool{},
	}
	reg.MustRegister(s.events, s.attempts, s.duration, s.queueWait, s.finished, s.hooks, s.limitWaits, s.limitSecs,
		s.warnings, s.processing, s.attemptsNow, s.aiCost, s.aiTokens)
	return s
}

// maxRemembered bounds the start maps: a start whose end never comes (the
// controller was stopped and the log replaced) must not grow memory.
const maxRemembered = 100_000

func (s *eventSeries) observe(e *events.Event, st *store.Store) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.events.WithLabelValues(string(e.Kind)).Inc()
	switch e.Kind {
	case events.MessageQueued:
		if len(s.queued) < maxRemembered {
			s.queued[e.MessageID] = e.Time
		}
	case events.MessageStarted:
		at, ok := s.queued[e.MessageID]
		delete(s.queued, e.MessageID)
		if !ok && st != nil {
			at = queuedSince(st, e.MessageID)
		}
		if !at.IsZero() && !e.Time.Before(at) {
			s.queueWait.Observe(e.Time.Sub(at).Seconds())
		}
		if !s.inFlight[e.MessageID] && len(s.inFlight) < maxRemembered {
			s.inFlight[e.MessageID] = true
			s.processing.Inc()
		}
	case events.AttemptStarted:
		k := attemptKey{e.MessageID, e.Attempt}
		if _, ok := s.started[k]; !ok && len(s.started) < maxRemembered {
			s.started[k] = attemptStart{at: e.Time, routine: e.Routine}
			s.attemptsNow.Inc()
		}
	case events.AttemptFinished:
		k := attemptKey{e.MessageID, e.Attempt}
		start, ok := s.started[k]
		outcome := AttemptOutcome(e)
		routine := start.routine
		if routine == "" {
			routine = "unknown"
		}
		s.attempts.WithLabelValues(routine, outcome).Inc()
		s.observeUsage(st, e, routine)
		if ok {
			delete(s.started, k)
			s.attemptsNow.Dec()
			s.duration.WithLabelValues(routine, outcome).Observe(max(e.Time.Sub(start.at).Seconds(), 0))
		}
	case events.MessageDone, events.MessageDead:
		outcome, reason := "done", ""
		if e.Kind == events.MessageDead {
			outcome, reason = "dead", DeadReason(e.Text)
		}
		s.finished.WithLabelValues(outcome, reason).Inc()
		delete(s.queued, e.MessageID)
		if s.inFlight[e.MessageID] {
			delete(s.inFlight, e.MessageID)
			s.processing.Dec()
		}
		for k := range s.started {
			if k.id == e.MessageID {
				delete(s.started, k)
				s.attemptsNow.Dec()
			}
		}
	case events.HookFinished:
		outcome := "ok"
		if e.ExitCode != 0 {
			outcome = "failed"
		}
		s.hooks.WithLabelValues(outcome).Inc()
	case events.UsageLimitWait:
		s.limitWaits.Inc()
		if !e.Until.IsZero() && e.Until.After(e.Time) {
			s.limitSecs.Add(e.Until.Sub(e.Time).Seconds())
		}
	case events.Warning:
		s.warnings.Inc()
	}
}

// AttemptOutcome classifies a finished attempt: succeeded, worker_lost
// (its lease ran out), interrupted (the controller stopped or restarted
// during it), or failed.
func AttemptOutcome(e *events.Event) string {
	switch {
	case e.ExitCode == 0 && e.Text == "":
		return "succeeded"
	case strings.HasPrefix(e.Text, "worker lost"):
		return "worker_lost"
	case strings.HasPrefix(e.Text, "interrupted"), strings.HasPrefix(e.Text, "controller restarted"):
		return "interrupted"
	}
	return "failed"
}

// DeadReason is the reason code that starts a dead letter's event text
// ("MaxAttempts: ..."), or "other" when it does not look like one (a
// capitalised word): a label value must come from a small set.
func DeadReason(text string) string {
	code, _, ok := strings.Cut(text, ":")
	if !ok || code == "" || len(code) > 40 || code[0] < 'A' || code[0] > 'Z' {
		return "other"
	}
	for _, r := range code {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_') {
			return "other"
		}
	}
	return code
}

// queuedSince is when a message entered the inbox (its file's
// modification time), for messages queued before the metrics started.
func queuedSince(st *store.Store, id string) time.Time {
	var at time.Time
	_ = st.ViewInbox(func(es []store.Entry) {
		for _, e := range es {
			if e.ID == id {
				at = e.ModTime
				return
			}
		}
	})
	return at
}
