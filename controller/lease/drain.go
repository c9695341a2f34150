package lease

import (
	"fmt"
	"slices"
)

// Drain marks a worker's session as draining: the worker is about to exit
// (a one-shot worker that reached its limit or stayed idle, or one stopped
// with SIGTERM). It gets no new work, and every lease given to it that is
// not among started (the leases it has begun to run, which it still
// reports) goes back to the front of the queue at once, for another
// worker, instead of running out as "worker lost". The worker guarantees
// that it never starts a lease it did not list here.
func (m *Manager) Drain(sessionID string, started []string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.sessions[sessionID]
	if s == nil {
		return fmt.Errorf("%w %q; register again", ErrUnknownSession, sessionID)
	}
	if !s.draining {
		m.log.Info("worker drains: it takes no new work", "worker", s.req.GetWorkerId(), "session", s.id)
	}
	s.draining = true
	var back []*lease
	for _, l := range m.leases {
		if l.state != stateActive || l.sess == nil || l.sess.req.GetWorkerId() != s.req.GetWorkerId() || slices.Contains(started, l.token) {
			continue
		}
		back = append(back, l)
	}
	if len(back) == 0 {
		return nil
	}
	for _, l := range back {
		if l.timer != nil {
			l.timer.Stop()
			l.timer = nil
		}
		if l.sess.current == l {
			l.sess.current = nil
		}
		l.sess.outbox = slices.DeleteFunc(l.sess.outbox, func(x *lease) bool { return x == l })
		l.sess = nil
		l.state = statePending
		m.released++
		m.log.Info("lease handed back by a draining worker", "lease", l.token, "worker", s.req.GetWorkerId(), "message", l.a.GetMessageId(), "attempt", l.a.GetAttempt())
	}
	m.pending = append(back, m.pending...)
	m.writeJournalLocked()
	m.assignLocked()
	return nil
}

// Stats are counts for metrics.
type Stats struct {
	// Pending is the work waiting for a worker: dispatched, not yet given
	// to one (routine attempts, hooks, router calls, readiness checks).
	Pending int
	// Active is the work given to a worker and not yet over.
	Active int
	// Lost counts leases lost because their worker stopped renewing them,
	// since the manager started.
	Lost uint64
	// Released counts leases handed back by draining workers.
	Released uint64
	// Workers counts registered workers by state: "busy" (holding work),
	// "idle" (connected, free), "draining" (connected, taking no new
	// work), "disconnected" (registered, no live stream).
	Workers map[string]int
}

// Stats returns the manager's current counts.
func (m *Manager) Stats() Stats {
	m.mu.Lock()
	defer m.mu.Unlock()
	st := Stats{Pending: len(m.pending), Lost: m.lost, Released: m.released,
		Workers: map[string]int{"busy": 0, "idle": 0, "draining": 0, "disconnected": 0}}
	for _, l := range m.leases {
		if l.state == stateActive || l.state == stateFencing {
			st.Active++
		}
	}
	now := m.clock.Now()
	for _, s := range m.sessions {
		connected := s.streaming && now.Sub(s.lastSeen) <= m.opts.LeaseTTL
		switch {
		case m.holdsWorkLocked(s):
			st.Workers["busy"]++
		case !connected:
			st.Workers["disconnected"]++
		case s.draining:
			st.Workers["draining"]++
		default:
			st.Workers["idle"]++
		}
	}
	return st
}
