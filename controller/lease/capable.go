package lease

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Unmatched explains why no connected worker satisfies req ("" when one
// does, busy or not), so that work nobody can take is reported instead of
// waiting in silence. connected tells whether any worker is connected.
// InPlace is not considered: replica and in-place placement is decided by
// the pipeline.
func (m *Manager) Unmatched(req Requirements) (why string, connected bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.clock.Now()
	var live []*session
	for _, id := range slices.Sorted(maps.Keys(m.sessions)) {
		if s := m.sessions[id]; s.streaming && now.Sub(s.lastSeen) <= m.opts.LeaseTTL {
			live = append(live, s)
		}
	}
	if len(live) == 0 {
		return "no worker is connected", false
	}
	req.InPlace = false
	drivers := map[string]bool{}
	driverOK := false
	for _, s := range live {
		if matches(s, req) {
			return "", true
		}
		for _, d := range s.req.GetDrivers() {
			drivers[d.GetName()] = true
		}
		if matches(s, Requirements{Driver: req.Driver}) {
			driverOK = true
		}
	}
	offered := strings.Join(slices.Sorted(maps.Keys(drivers)), ", ")
	if !driverOK {
		return fmt.Sprintf("no connected worker offers driver %q (they offer: %s)", req.Driver, offered), true
	}
	var labels []string
	for _, k := range slices.Sorted(maps.Keys(req.Labels)) {
		labels = append(labels, k+"="+req.Labels[k])
	}
	if req.Driver == "" {
		return fmt.Sprintf("no connected worker has the labels %s", strings.Join(labels, ", ")), true
	}
	return fmt.Sprintf("no connected worker with driver %q has the labels %s", req.Driver, strings.Join(labels, ", ")), true
}

// WaitConnected returns once a worker is connected, or with ctx's error.
func (m *Manager) WaitConnected(ctx context.Context) error {
	for {
		m.mu.Lock()
		if m.closed {
			m.mu.Unlock()
			return ErrClosed
		}
		now := m.clock.Now()
		for _, s := range m.sessions {
			if s.streaming && now.Sub(s.lastSeen) <= m.opts.LeaseTTL {
				m.mu.Unlock()
				return nil
			}
		}
		ch := m.streamed
		m.mu.Unlock()
		select {
		case <-ch:
		case <-m.closing:
		case <-ctx.Done():
			return fmt.Errorf("wait for a worker to connect: %w", ctx.Err())
		}
	}
}
