// Package metrics exports a controller's state in the Prometheus text
// format, for an opt-in HTTP listener (decree-controller --metrics-listen).
//
// It reads the controller from the outside: gauges come from the store
// (the inbox index and the counts of done and dead letters) and the lease
// manager (work waiting for a worker, workers by state) when scraped;
// counters and histograms follow the event log (controller/events). It
// never asks the processing loop anything.
//
// No metric carries a message, chain, attempt, lease or worker id as a
// label: every label has a small fixed set of values (or, for routine, the
// project's routine names), so series stay few however many messages
// run. The README lists every metric ("Metrics and traces").
package metrics

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/decreehq/decree/controller/events"
	"github.com/decreehq/decree/controller/lease"
	"github.com/decreehq/decree/controller/store"
)

// RunnableMetric is the autoscaling input: work waiting for a worker. The
// KEDA ScaledJob in deploy/k8s/keda reads it.
const RunnableMetric = "decree_runnable_attempts"

// Deps are what the metrics read.
type Deps struct {
	Store  *store.Store
	Events *events.Log
	Leases *lease.Manager
	Logger *slog.Logger
}

// Metrics holds the registry and the event-driven series.
type Metrics struct {
	d   Deps
	log *slog.Logger
	reg *prometheus.Registry
	ev  *eventSeries
}

// New registers every metric. Run follows the event log.
func New(d Deps) *Metrics {
	log := d.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	m := &Metrics{d: d, log: log, reg: prometheus.NewRegistry()}
	m.ev = newEventSeries(m.reg)
	m.reg.MustRegister(&stateCollector{d: d, log: log},
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// Handler serves the metrics in the Prometheus text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{ErrorLog: slogPrinter{m.log}, Registry: m.reg})
}

// Run follows the event log from its end until ctx ends or the log closes.
func (m *Metrics) Run(ctx context.Context) {
	m.d.Events.Follow(ctx, func(e *events.Event) { m.ev.observe(e, m.d.Store) })
}

type slogPrinter struct{ log *slog.Logger }

func (p slogPrinter) Println(v ...any) { p.log.Warn("metrics", "err", v) }

// sinceOr is t's age, or 0 for a zero t.
func sinceOr(now, t time.Time) float64 {
	if t.IsZero() || now.Before(t) {
		return 0
	}
	return now.Sub(t).Seconds()
}
