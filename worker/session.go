package worker

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	decreev1 "github.com/decreehq/decree/proto/decree/v1"
)

// fatalError marks a session failure that reconnecting cannot cure.
type fatalError struct{ err error }

func (f fatalError) Error() string { return f.err.Error() }
func (f fatalError) Unwrap() error { return f.err }

// sessions registers, serves the session until it breaks, and registers
// again with backoff, until ctx ends or a fatal error occurs.
func (w *worker) sessions(ctx context.Context) error {
	failures := 0
	for {
		healthy, err := w.session(ctx)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		var fatal fatalError
		if errors.As(err, &fatal) {
			w.log.Error("worker stops", "err", fatal.err)
			return fatal.err
		}
		if healthy {
			failures = 0
		}
		w.log.Warn("session with the controller ended; reconnecting", "controller", w.opts.Controller, "err", err)
		if err := w.opts.Backoff.Sleep(ctx, failures); err != nil {
			return err
		}
		failures++
	}
}

// session runs one session. It reports whether the session was healthy (a
// heartbeat got through, so the next reconnection starts with a short
// delay again) and why it ended.
func (w *worker) session(ctx context.Context) (healthy bool, _ error) {
	instance, err := readInstanceID(w.workspace)
	if err != nil {
		return false, fatalError{err}
	}
	req := &decreev1.RegisterWorkerRequest{
		WorkerId:            w.opts.WorkerID,
		Labels:              w.opts.Labels,
		Drivers:             w.opts.Drivers,
		Workspace:           w.workspace,
		Hostname:            w.hostname,
		WorkspaceInstanceId: instance,
		Version:             w.opts.Version,
	}
	rctx, cancel := context.WithTimeout(ctx, defaultCallTimeout)
	resp, err := w.client.RegisterWorker(rctx, req)
	cancel()
	if err != nil {
		switch status.Code(err) {
		case codes.InvalidArgument, codes.PermissionDenied, codes.Unauthenticated, codes.Unimplemented:
			return false, fatalError{fmt.Errorf("controller %s refused to register worker %s: %w", w.opts.Controller, w.opts.WorkerID, err)}
		}
		return false, fmt.Errorf("register with controller %s: %w", w.opts.Controller, err)
	}
	w.inPlace.Store(resp.GetInPlace())
	if !resp.GetInPlace() {
		if _, err := w.openReplica(); err != nil {
			return false, fatalError{fmt.Errorf("workspace %s is a replica of the controller's project, but it cannot be kept: %w", w.workspace, err)}
		}
	}
	sid := resp.GetSessionId()
	w.sid.Store(&sid)
	w.leaseTTL.Store(int64(resp.GetLeaseTtl().AsDuration()))
	interval := resp.GetHeartbeatInterval().AsDuration()
	if interval <= 0 {
		interval = w.opts.HeartbeatInterval
	}
	w.log.Info("registered with the controller", "controller", w.opts.Controller, "session", sid, "heartbeat", interval)

	sctx, end := context.WithCancelCause(ctx)
	defer end(nil)
	stream, err := w.client.StreamAssignments(sctx, &decreev1.StreamAssignmentsRequest{SessionId: sid})
	if err != nil {
		return false, fmt.Errorf("open assignment stream: %w", err)
	}
	var beat atomic.Bool
	hbDone := make(chan struct{})
	go func() {
		defer close(hbDone)
		w.heartbeats(sctx, end, sid, interval, &beat)
	}()
	defer func() { end(nil); <-hbDone }()
	for {
		msg, err := stream.Recv()
		if err != nil {
			if cause := context.Cause(sctx); cause != nil && sctx.Err() != nil && ctx.Err() == nil {
				return beat.Load(), cause
			}
			return beat.Load(), fmt.Errorf("assignment stream: %w", err)
		}
		a := msg.GetAssignment()
		if a == nil || a.GetLeaseToken() == "" {
			w.log.Warn("ignoring an assignment without a lease token")
			continue
		}
		if w.draining() {
			w.log.Info("ignoring an assignment that came while the worker drains; the controller gives it to another worker", "message", a.GetMessageId())
			continue
		}
		if !w.leases.add(a.GetLeaseToken()) {
			w.log.Debug("ignoring an assignment already held or finished", "message", a.GetMessageId())
			continue
		}
		select {
		case w.queue <- a:
		default:
			w.leases.finish(a.GetLeaseToken())
			w.log.Error("too many assignments queued; dropping one (its lease will expire)", "message", a.GetMessageId())
		}
	}
}

// heartbeats renews the held leases every interval and stops the leases the
// controller names. A failed heartbeat ends the session.
func (w *worker) heartbeats(ctx context.Context, end context.CancelCauseFunc, sid string, interval time.Duration, beat *atomic.Bool) {
	t := time.NewTicker(interval)
	defer t.Stop()
	first := len(w.leases.tokens()) > 0 // renew at once after a reconnect
	for {
		if !first {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			case <-w.kick: // work waits for its lease to be confirmed
			}
		}
		first = false
		timeout := 2 * interval
		if timeout < 5*time.Second {
			timeout = 5 * time.Second
		}
		hctx, cancel := context.WithTimeout(ctx, timeout)
		tokens, draining := w.leases.beat()
		sent := time.Now()
		resp, err := w.client.Heartbeat(hctx, &decreev1.HeartbeatRequest{SessionId: sid, LeaseTokens: tokens, Draining: draining})
		cancel()
		if err != nil {
			if ctx.Err() == nil {
				end(fmt.Errorf("heartbeat: %w", err))
			}
			return
		}
		beat.Store(true)
		w.leases.renew(tokens, resp.GetStopLeases(), sent, time.Duration(w.leaseTTL.Load()))
		for _, tok := range resp.GetStopLeases() {
			if w.leases.stop(tok, errStoppedByController) {
				w.log.Info("controller asked to stop a lease")
			}
		}
	}
}
