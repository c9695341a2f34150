package lease

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	decreev1 "github.com/decreehq/decree/proto/decree/v1"
	"google.golang.org/protobuf/types/known/durationpb"
)

// keepEnded is how many ended leases are remembered for idempotent replies.
const keepEnded = 4096

func durationProto(d time.Duration) *durationpb.Duration { return durationpb.New(d) }

// Dispatch hands w, as an Assignment, to a connected worker that meets req (waiting
// until one is free) under a new lease, and blocks until:
//
//   - the worker reports a result: returned with a nil error;
//   - the lease is lost (not renewed within the TTL): a Result with Lost
//     set and a "worker lost" status, nil error;
//   - ctx ends: if no worker had the assignment yet, Dispatch returns at
//     once; otherwise the worker is asked to stop (HeartbeatResponse
//     stop_leases), the lease is no longer renewed, and Dispatch waits for
//     the worker's final report or the lease's loss (at most one TTL), so
//     the caller knows the worker no longer touches the tree. The Result
//     is returned with ctx's error.
//
// The assignment gets a fresh lease token. Logs of the assignment's
// message attempt count as live (for Follow) while it runs.
func (m *Manager) Dispatch(ctx context.Context, w *Work, req Requirements) (Result, error) {
	if w == nil || workKinds[w.Kind] == decreev1.AssignmentKind_ASSIGNMENT_KIND_UNSPECIFIED {
		return Result{}, fmt.Errorf("%w: dispatch needs work of a known kind", ErrInvalid)
	}
	a := w.assignment()
	l := &lease{token: newToken(), a: a, req: req, done: make(chan struct{})}
	a.LeaseToken = l.token
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return Result{}, ErrClosed
	}
	m.leases[l.token] = l
	if a.GetMessageId() != "" && a.GetAttempt() >= 1 {
		l.logBegun = true
		m.opts.Logs.Begin(a.GetMessageId(), int(a.GetAttempt()))
	}
	m.pending = append(m.pending, l)
	m.assignLocked()
	m.mu.Unlock()

	select {
	case <-l.done:
		return m.resultOf(l)
	case <-ctx.Done():
	}
	m.mu.Lock()
	switch {
	case l.state == stateEnded:
	case l.state == stateFencing:
		// Lost already; the loss is reported after the fence margin.
	case l.state == statePending || slices.Contains(l.sess.outbox, l):
		m.endLocked(l, Result{}, "cancelled before a worker received it")
	default:
		l.stop = true
		m.log.Info("asking the worker to stop", "lease", l.token, "message", a.GetMessageId(), "attempt", a.GetAttempt())
	}
	m.mu.Unlock()
	<-l.done
	res, err := m.resultOf(l)
	if err == nil {
		err = ctx.Err()
	}
	return res, err
}

// StopBound is the longest Dispatch waits once its ctx ended: a worker
// asked to stop has the lease's TTL to confirm, and a lease lost is
// reported a fence margin after its expiry. A caller that stops must
// wait this long (plus its own work) to learn how the attempt ended.
func (m *Manager) StopBound() time.Duration { return m.opts.LeaseTTL + m.opts.FenceMargin }

func (m *Manager) resultOf(l *lease) (Result, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed && l.result.Status == nil && !l.result.Lost {
		return l.result, ErrClosed
	}
	return l.result, nil
}

// assignLocked gives pending leases to free eligible sessions, FIFO.
func (m *Manager) assignLocked() {
	if m.closed || m.holdingLocked() {
		return
	}
	now := m.clock.Now()
	given := false
	kept := m.pending[:0]
	for _, l := range m.pending {
		s := m.pickLocked(l.req, now)
		if s == nil {
			kept = append(kept, l)
			continue
		}
		l.state = stateActive
		l.sess = s
		l.expires = now.Add(m.opts.LeaseTTL)
		l.timer = m.clock.AfterFunc(m.opts.LeaseTTL, func() { m.expire(l) })
		s.current = l
		s.lastGiven = now
		if lane := l.req.Lane; lane != "" {
			// The lane keeps this worker from its first assignment on
			// (affinity.go), before any other lane's work can take it.
			if m.reserved == nil {
				m.reserved = map[string]string{}
			}
			for w, ln := range m.reserved {
				if ln == lane {
					delete(m.reserved, w)
				}
			}
			m.reserved[s.req.GetWorkerId()] = lane
		}
		s.outbox = append(s.outbox, l)
		given = true
		broadcast(&s.changed)
		m.log.Info("assignment given", "lease", l.token, "worker", s.req.GetWorkerId(), "message", l.a.GetMessageId(), "attempt", l.a.GetAttempt(), "kind", l.a.GetKind())
	}
	clear(m.pending[len(kept):])
	m.pending = kept
	if given {
		m.writeJournalLocked()
	}
}

// pickLocked returns the eligible free session given work least recently.
func (m *Manager) pickLocked(req Requirements, now time.Time) *session {
	var best *session
	for _, s := range m.sessions {
		if !s.streaming || s.draining || s.current != nil || now.Sub(s.lastSeen) > m.opts.LeaseTTL || !matches(s, req) || !m.allowedLocked(s, req, now) {
			continue
		}
		if best == nil || s.lastGiven.Before(best.lastGiven) || (s.lastGiven.Equal(best.lastGiven) && s.id < best.id) {
			best = s
		}
	}
	return best
}

func matches(s *session, req Requirements) bool {
	if req.InPlace && !s.inPlace {
		return false
	}
	if req.Replica && s.inPlace {
		return false
	}
	if req.Driver != "" && !slices.ContainsFunc(s.req.GetDrivers(), func(d *decreev1.DriverInfo) bool { return d.GetName() == req.Driver }) {
		return false
	}
	labels := s.req.GetLabels()
	for k, v := range req.Labels {
		if got, ok := labels[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// expire fences l when its deadline passed (else re-arms the timer), and
// ends it as lost once the fence margin has passed too.
func (m *Manager) expire(l *lease) {
	m.mu.Lock()
	defer m.mu.Unlock()
	switch l.state {
	case stateActive:
		if left := l.expires.Sub(m.clock.Now()); left > 0 {
			l.timer.Reset(left)
			return
		}
		worker := l.sess.req.GetWorkerId()
		l.endNote = fmt.Sprintf("worker lost: %s did not renew its lease within %s", worker, m.opts.LeaseTTL)
		if l.stop {
			l.endNote = fmt.Sprintf("worker lost: %s did not confirm the stop within %s", worker, m.opts.LeaseTTL)
		}
		l.state = stateFencing
		l.timer.Reset(m.opts.FenceMargin)
		m.log.Warn("lease expired; its processes are being killed by the worker's supervisor", "lease", l.token, "worker", worker, "message", l.a.GetMessageId(), "attempt", l.a.GetAttempt(), "margin", m.opts.FenceMargin)
	case stateFencing:
		worker := l.sess.req.GetWorkerId()
		m.lost++
		m.log.Warn("lease lost", "lease", l.token, "worker", worker, "message", l.a.GetMessageId(), "attempt", l.a.GetAttempt())
		m.endLocked(l, Result{
			Lost:     true,
			WorkerID: worker,
			Status:   &decreev1.ExitStatus{ExitCode: -1, Error: l.endNote},
		}, l.endNote)
	}
}

// endLocked ends l with res; note says why when there is no worker report.
func (m *Manager) endLocked(l *lease, res Result, note string) {
	if l.state == stateEnded {
		return
	}
	l.state = stateEnded
	l.result = res
	l.endNote = note
	if l.timer != nil {
		l.timer.Stop()
	}
	if s := l.sess; s != nil {
		if s.current == l {
			s.current = nil
		}
		s.outbox = slices.DeleteFunc(s.outbox, func(x *lease) bool { return x == l })
	}
	m.pending = slices.DeleteFunc(m.pending, func(x *lease) bool { return x == l })
	if l.logBegun {
		m.opts.Logs.End(l.a.GetMessageId(), int(l.a.GetAttempt()))
	}
	close(l.done)
	if l.sess != nil && !m.closed {
		// On Close the workers may still run the work: the journal keeps
		// it, so the next controller waits for them.
		m.writeJournalLocked()
	}
	m.ended = append(m.ended, l.token)
	if over := len(m.ended) - keepEnded; over > 0 {
		for _, t := range m.ended[:over] {
			delete(m.leases, t)
		}
		m.ended = append(m.ended[:0:0], m.ended[over:]...)
	}
	m.assignLocked()
}

// Workers describes the registered workers, after forgetting those not
// heard from for Options.ForgetAfter.
func (m *Manager) Workers() []*decreev1.WorkerInfo {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.forgetLocked(m.clock.Now())
	ids := slices.Sorted(maps.Keys(m.sessions))
	out := make([]*decreev1.WorkerInfo, 0, len(ids))
	for _, id := range ids {
		s := m.sessions[id]
		w := &decreev1.WorkerInfo{
			Id:        s.req.GetWorkerId(),
			Labels:    maps.Clone(s.req.GetLabels()),
			Workspace: s.req.GetWorkspace(),
			Hostname:  s.req.GetHostname(),
			Connected: s.streaming && m.clock.Now().Sub(s.lastSeen) <= m.opts.LeaseTTL,
			InPlace:   s.inPlace,
		}
		w.LastHeartbeat = timestampProto(s.lastSeen)
		for _, d := range s.req.GetDrivers() {
			w.Drivers = append(w.Drivers, d.GetName())
		}
		if s.current != nil {
			w.CurrentMessageId = s.current.a.GetMessageId()
		}
		out = append(out, w)
	}
	return out
}
