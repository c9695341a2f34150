package lease

import (
	"context"
	"fmt"
	"time"

	decreev1 "github.com/decreehq/decree/proto/decree/v1"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
)

func timestampProto(t time.Time) *timestamppb.Timestamp { return timestamppb.New(t) }

// Stream delivers the session's assignments through send until ctx ends,
// the session is replaced (ErrSuperseded), or the manager closes. A newer
// Stream call for the same session supersedes this one. When send fails,
// the assignments not yet attempted are kept for the next stream; the one
// whose send failed stays under its lease (the worker may have received
// it; if not, the lease runs out and the attempt fails as "worker lost").
// Workers must ignore an assignment whose lease token they already hold.
func (m *Manager) Stream(ctx context.Context, sessionID string, send func(*decreev1.Assignment) error) error {
	m.mu.Lock()
	s := m.sessions[sessionID]
	if s == nil {
		m.mu.Unlock()
		return fmt.Errorf("%w %q; register again", ErrUnknownSession, sessionID)
	}
	s.streamGen++
	gen := s.streamGen
	s.streaming = true
	s.lastSeen = m.clock.Now()
	broadcast(&s.changed)
	broadcast(&m.streamed)
	m.assignLocked()
	m.mu.Unlock()
	defer func() {
		m.mu.Lock()
		if s.streamGen == gen {
			s.streaming = false
		}
		m.mu.Unlock()
	}()
	for {
		m.mu.Lock()
		if m.closed {
			m.mu.Unlock()
			return ErrClosed
		}
		if s.streamGen != gen || m.sessions[s.id] != s {
			m.mu.Unlock()
			return ErrSuperseded
		}
		var batch []*decreev1.Assignment
		for _, l := range s.outbox {
			batch = append(batch, proto.Clone(l.a).(*decreev1.Assignment))
		}
		sent := s.outbox
		s.outbox = nil
		changed := s.changed
		m.mu.Unlock()
		for i, a := range batch {
			if err := send(a); err != nil {
				m.mu.Lock()
				for _, l := range sent[i+1:] {
					if l.state == stateActive {
						s.outbox = append(s.outbox, l)
					}
				}
				m.mu.Unlock()
				return err
			}
		}
		if len(batch) > 0 {
			continue
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		case <-m.closing:
			return ErrClosed
		}
	}
}

// Heartbeat keeps the session alive and renews the listed leases held by
// this worker. It returns the leases the worker must stop: ones the
// controller asked to stop (these are no longer renewed), ones that ended
// (lost or finished), and tokens it does not know.
func (m *Manager) Heartbeat(sessionID string, tokens []string) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.sessions[sessionID]
	if s == nil {
		return nil, fmt.Errorf("%w %q; register again", ErrUnknownSession, sessionID)
	}
	now := m.clock.Now()
	s.lastSeen = now
	m.accountLocked(s.req.GetWorkerId(), tokens)
	var stop []string
	listed := map[string]bool{}
	for _, t := range tokens {
		listed[t] = true
		l := m.leases[t]
		switch {
		case l == nil, l.state != stateActive, l.sess.req.GetWorkerId() != s.req.GetWorkerId():
			stop = append(stop, t)
		case l.stop:
			stop = append(stop, t)
		default:
			l.expires = now.Add(m.opts.LeaseTTL)
			if l.sess != s {
				// The worker reconnected under a new session.
				if l.sess.current == l {
					l.sess.current = nil
				}
				l.sess = s
				s.current = l
			}
		}
	}
	if l := s.current; l != nil && l.stop && !listed[l.token] {
		stop = append(stop, l.token)
	}
	return stop, nil
}
