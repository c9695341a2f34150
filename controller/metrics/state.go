package metrics

import (
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/decreehq/decree/controller/store"
)

// stateCollector reads the store and the lease manager when scraped.
type stateCollector struct {
	d   Deps
	log *slog.Logger
}

var (
	descQueued = prometheus.NewDesc("decree_messages_queued",
		"Messages in the inbox, the one being processed included.", nil, nil)
	descOldest = prometheus.NewDesc("decree_oldest_queued_message_age_seconds",
		"Age of the oldest message in the inbox (by its file's modification time); 0 when the inbox is empty.", nil, nil)
	descDeadNow = prometheus.NewDesc("decree_dead_letters",
		"Messages in inbox/dead/ now (dead-lettered and not requeued).", nil, nil)
	descRunnable = prometheus.NewDesc(RunnableMetric,
		"Work the controller has handed out that no worker has taken yet: routine attempts, and the hooks, router calls and readiness checks around them. The autoscaling input (deploy/k8s/keda).", nil, nil)
	descActive = prometheus.NewDesc("decree_active_leases",
		"Work held by a worker under a lease and not yet reported.", nil, nil)
	descWorkers = prometheus.NewDesc("decree_workers",
		"Registered workers by state: busy (holding work), idle (connected, free), draining (leaving, takes no new work), disconnected.", []string{"state"}, nil)
	descLost = prometheus.NewDesc("decree_leases_lost_total",
		"Leases lost because their worker stopped renewing them (the attempt ends as \"worker lost\").", nil, nil)
	descReleased = prometheus.NewDesc("decree_leases_released_total",
		"Leases handed back unstarted by draining workers (one-shot workers leaving, SIGTERM) and given to another worker.", nil, nil)
)

func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descQueued, descOldest, descDeadNow, descRunnable, descActive, descWorkers, descLost, descReleased} {
		ch <- d
	}
}

func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	now := time.Now()
	if sum, err := c.d.Store.Summarize(); err != nil {
		c.log.Warn("metrics: count the inbox", "err", err)
	} else {
		ch <- prometheus.MustNewConstMetric(descQueued, prometheus.GaugeValue, float64(sum.Queued))
		ch <- prometheus.MustNewConstMetric(descDeadNow, prometheus.GaugeValue, float64(sum.Dead))
	}
	var oldest time.Time
	if err := c.d.Store.ViewInbox(func(es []store.Entry) {
		for _, e := range es {
			if oldest.IsZero() || e.ModTime.Before(oldest) {
				oldest = e.ModTime
			}
		}
	}); err == nil {
		ch <- prometheus.MustNewConstMetric(descOldest, prometheus.GaugeValue, sinceOr(now, oldest))
	}
	st := c.d.Leases.Stats()
	ch <- prometheus.MustNewConstMetric(descRunnable, prometheus.GaugeValue, float64(st.Pending))
	ch <- prometheus.MustNewConstMetric(descActive, prometheus.GaugeValue, float64(st.Active))
	for state, n := range st.Workers {
		ch <- prometheus.MustNewConstMetric(descWorkers, prometheus.GaugeValue, float64(n), state)
	}
	ch <- prometheus.MustNewConstMetric(descLost, prometheus.CounterValue, float64(st.Lost))
	ch <- prometheus.MustNewConstMetric(descReleased, prometheus.CounterValue, float64(st.Released))
}
