package lease

import "time"

// Lanes and worker affinity.
//
// A parallel chain (a lane, see controller/pipeline's lanes) runs on one
// worker for its whole length: its first assignment goes to any free
// eligible worker, which the lane then reserves (Reserve). While the
// reservation holds and that worker is connected, the lane's assignments
// wait for it, and work of other lanes or of no lane is not given to it.
// A reserved worker that is gone (not streaming, draining, or silent for a
// lease TTL) no longer binds its lane: the next assignment goes to another
// worker, which the lane reserves in turn.

// Reserve binds worker to lane: the lane's work waits for it and other
// work avoids it. A lane holds at most one reservation; reserving another
// worker replaces it.
func (m *Manager) Reserve(lane, worker string) {
	if lane == "" || worker == "" {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.reserved == nil {
		m.reserved = map[string]string{}
	}
	for w, l := range m.reserved {
		if l == lane {
			delete(m.reserved, w)
		}
	}
	m.reserved[worker] = lane
	m.assignLocked()
}

// Unreserve ends lane's reservation, if any.
func (m *Manager) Unreserve(lane string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for w, l := range m.reserved {
		if l == lane {
			delete(m.reserved, w)
		}
	}
	m.assignLocked()
}

// Reserved returns the worker lane has reserved, or "".
func (m *Manager) Reserved(lane string) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	for w, l := range m.reserved {
		if l == lane {
			return w
		}
	}
	return ""
}

// alive reports whether s can take work now or soon.
func (m *Manager) alive(s *session, now time.Time) bool {
	return s.streaming && !s.draining && now.Sub(s.lastSeen) <= m.opts.LeaseTTL
}

// allowedLocked applies reservations to s for req: a lane whose reserved
// worker is alive may use only that worker, and a worker reserved by a
// live lane takes no other work.
func (m *Manager) allowedLocked(s *session, req Requirements, now time.Time) bool {
	worker := s.req.GetWorkerId()
	if owner, ok := m.reserved[worker]; ok && owner != req.Lane {
		return false
	}
	if req.Lane == "" {
		return true
	}
	for w, l := range m.reserved {
		if l != req.Lane || w == worker {
			continue
		}
		// The lane reserved another worker: wait for it while it lives.
		for _, o := range m.sessions {
			if o.req.GetWorkerId() == w && m.alive(o, now) {
				return false
			}
		}
	}
	return true
}
