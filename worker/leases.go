package worker

import (
	"context"
	"sort"
	"sync"
	"time"
)

// leaseSet tracks the leases the worker holds (queued, running, or waiting
// for their report to be delivered), so heartbeats can renew them and the
// controller can stop them. It also remembers recently finished leases so a
// re-delivered assignment is not run twice.
type leaseSet struct {
	mu       sync.Mutex
	active   map[string]*lease
	finished []string
	keep     int
}

type lease struct {
	cancel  context.CancelCauseFunc // set while running
	stopped error                   // set when stopped before it ran
	renewed time.Time               // delivery or last renewing heartbeat
}

func newLeaseSet(keep int) *leaseSet {
	return &leaseSet{active: make(map[string]*lease), keep: keep}
}

// add records a newly delivered lease; false when it is already known.
func (s *leaseSet) add(token string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.active[token]; ok {
		return false
	}
	for _, f := range s.finished {
		if f == token {
			return false
		}
	}
	s.active[token] = &lease{renewed: time.Now()}
	return true
}

// renewed notes that a heartbeat sent at t listing tokens was answered.
func (s *leaseSet) renew(tokens []string, t time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, tok := range tokens {
		if l, ok := s.active[tok]; ok && t.After(l.renewed) {
			l.renewed = t
		}
	}
}

// sinceRenewed is how long ago token was last renewed.
func (s *leaseSet) sinceRenewed(token string) time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	if l, ok := s.active[token]; ok {
		return time.Since(l.renewed)
	}
	return 0
}

// start attaches the running work's cancel function; it returns the reason
// when the lease was stopped before it started.
func (s *leaseSet) start(token string, cancel context.CancelCauseFunc) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	l, ok := s.active[token]
	if !ok {
		l = &lease{renewed: time.Now()}
		s.active[token] = l
	}
	if l.stopped != nil {
		return l.stopped
	}
	l.cancel = cancel
	return nil
}

// stop cancels the work under token with cause; unknown tokens are ignored.
func (s *leaseSet) stop(token string, cause error) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	l, ok := s.active[token]
	if !ok {
		return false
	}
	if l.cancel != nil {
		l.cancel(cause)
	} else if l.stopped == nil {
		l.stopped = cause
	}
	return true
}

// finish forgets token (remembering it as finished).
func (s *leaseSet) finish(token string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.active, token)
	s.finished = append(s.finished, token)
	if len(s.finished) > s.keep {
		s.finished = s.finished[len(s.finished)-s.keep:]
	}
}

// tokens lists the held leases, sorted.
func (s *leaseSet) tokens() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, 0, len(s.active))
	for t := range s.active {
		out = append(out, t)
	}
	sort.Strings(out)
	return out
}
