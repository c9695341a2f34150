package worker

import (
	"context"
	"time"

	decreev1 "github.com/decreehq/decree/proto/decree/v1"
)

// One-shot workers (Options.ExitAfter, Options.ExitWhenIdle) are what a
// scaler such as KEDA starts per unit of queued work: they take work until
// their limit, report it, and exit 0.
//
// Draining is how a worker leaves without losing work. Once it reaches its
// limit, stays idle, or is stopped (SIGTERM), it starts nothing new and its
// heartbeats say it drains (HeartbeatRequest.draining) and list only the
// leases it has started: the controller gives it no new work and puts any
// other lease it was given back in the queue at once, so an assignment in
// flight to an exiting worker never runs out as "worker lost". The work it
// had started is finished (or, on SIGTERM, stopped) and reported first.

// draining reports whether the worker drains.
func (w *worker) draining() bool {
	_, d := w.leases.beat()
	return d
}

// runJobs runs queued assignments one at a time until ctx ends, or until
// the one-shot limits say the worker is done, when it calls exit. Uploads
// and reports of the job in progress use drain, which outlives ctx a
// little.
func (w *worker) runJobs(ctx, drain context.Context, exit func()) {
	for {
		var idle <-chan time.Time
		var timer *time.Timer
		if w.opts.ExitWhenIdle > 0 {
			timer = time.NewTimer(w.opts.ExitWhenIdle)
			idle = timer.C
		}
		select {
		case <-ctx.Done():
			stopTimer(timer)
			return
		case a := <-w.queue:
			stopTimer(timer)
			w.runJob(ctx, drain, a)
			if n := w.opts.ExitAfter; n > 0 && w.taken.Load() >= int64(n) {
				w.log.Info("ran the assignments it was started for; exiting", "exit_after", n)
				exit()
				return
			}
		case <-idle:
			if w.leases.busy() {
				continue // an assignment is arriving
			}
			w.leases.drain()
			w.log.Info("no work came; exiting", "exit_when_idle", w.opts.ExitWhenIdle)
			exit()
			return
		}
	}
}

func stopTimer(t *time.Timer) {
	if t != nil {
		t.Stop()
	}
}

// counted notes that an assignment started; at the ExitAfter-th the worker
// drains, so the controller gives it nothing more.
func (w *worker) counted() {
	if n := w.opts.ExitAfter; n > 0 && w.taken.Add(1) >= int64(n) {
		w.leases.drain()
		select {
		case w.kick <- struct{}{}:
		default:
		}
	}
}

// leave tells the controller, in a last heartbeat, that the worker drains,
// so that any lease given to it and not started goes to another worker at
// once. Best effort: without an answer such a lease runs out as usual.
func (w *worker) leave(ctx context.Context) {
	w.leases.drain()
	sid := w.sid.Load()
	if sid == nil {
		return
	}
	tokens, _ := w.leases.beat()
	// Its own short deadline: the drain time may be used up by a report
	// that could not be delivered.
	hctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	if _, err := w.client.Heartbeat(hctx, &decreev1.HeartbeatRequest{SessionId: *sid, LeaseTokens: tokens, Draining: true}); err != nil {
		w.log.Warn("could not tell the controller the worker leaves; work given to it in the meantime waits for its lease to run out", "err", err)
	}
}
