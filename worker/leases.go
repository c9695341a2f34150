package worker

import (
	"context"
	"errors"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/decreehq/decree/pkg/supervisor"
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
	// draining: the worker is about to exit; it starts no more work and
	// heartbeats list only started leases (see drain).
	draining bool
	// ran lists leases whose work ran but whose report never got an
	// answer: a draining heartbeat still lists them, so the controller
	// does not hand them to another worker as unstarted.
	ran []string
}

type lease struct {
	cancel  context.CancelCauseFunc // set while running
	stopped error                   // set when stopped before it ran
	renewed time.Time               // delivery or last renewing heartbeat
	// confirmed is closed by the first renewal after delivery.
	confirmed chan struct{}
	// sent is the send time of the last heartbeat that renewed the lease
	// (zero before the first), ttl the lease TTL it was renewed for.
	sent time.Time
	ttl  time.Duration
	// deadline is the running work's supervisor lease, once started.
	deadline *supervisor.Lease
}

func newLease() *lease {
	return &lease{renewed: time.Now(), confirmed: make(chan struct{})}
}

func newLeaseSet(keep int) *leaseSet {
	return &leaseSet{active: make(map[string]*lease), keep: keep}
}

// add records a newly delivered lease; false when it is already known.
func (s *leaseSet) add(token string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.active[token]; ok || s.draining {
		return false
	}
	for _, f := range s.finished {
		if f == token {
			return false
		}
	}
	s.active[token] = newLease()
	return true
}

// renew notes that a heartbeat sent at t listing tokens was answered and
// renewed each of them, except those in stopped, for ttl: their
// supervisors may run until t+ttl.
func (s *leaseSet) renew(tokens []string, stopped []string, t time.Time, ttl time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, tok := range tokens {
		l, ok := s.active[tok]
		if !ok || slices.Contains(stopped, tok) {
			continue
		}
		if t.After(l.renewed) {
			l.renewed = t
		}
		if t.After(l.sent) {
			l.sent, l.ttl = t, ttl
			if l.deadline != nil && ttl > 0 {
				l.deadline.Extend(t.Add(ttl))
			}
		}
		select {
		case <-l.confirmed:
		default:
			close(l.confirmed)
		}
	}
}

// confirmed returns a channel closed once token has been renewed after
// its delivery.
func (s *leaseSet) confirmed(token string) <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	l, ok := s.active[token]
	if !ok {
		l = newLease()
		s.active[token] = l
	}
	return l.confirmed
}

// fence returns the supervisor lease of token's work: valid until the last
// renewing heartbeat's send time plus its TTL, extended by later renewals.
func (s *leaseSet) fence(token string, ttl time.Duration) *supervisor.Lease {
	s.mu.Lock()
	defer s.mu.Unlock()
	l, ok := s.active[token]
	if !ok {
		return supervisor.NewLease(time.Now()) // already over: expired
	}
	if l.deadline == nil {
		if l.ttl > 0 {
			ttl = l.ttl
		}
		l.deadline = supervisor.NewLease(l.sent.Add(ttl))
	}
	return l.deadline
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
		l = newLease()
		s.active[token] = l
	}
	if l.stopped != nil {
		return l.stopped
	}
	if s.draining {
		return errDraining
	}
	l.cancel = cancel
	return nil
}

// errDraining stops work that had not started when the worker began to
// drain: the controller gives it to another worker.
var errDraining = errors.New("the worker is exiting; the controller gives this work to another worker")

// drain makes the set draining: leases not yet started never start (the
// controller hands them to other workers when the next heartbeat, which
// lists only started ones, says the worker drains).
func (s *leaseSet) drain() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.draining = true
	for _, l := range s.active {
		if l.cancel == nil && l.stopped == nil {
			l.stopped = errDraining
		}
	}
}

// beat is what the next heartbeat sends: the leases to renew (sorted; only
// started ones once draining) and whether the worker drains. The two are
// read together, so a draining heartbeat never lists a lease that will
// not run.
func (s *leaseSet) beat() (tokens []string, draining bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, 0, len(s.active))
	for t, l := range s.active {
		if !s.draining || l.cancel != nil {
			out = append(out, t)
		}
	}
	if s.draining {
		out = append(out, s.ran...)
	}
	sort.Strings(out)
	return out, s.draining
}

// unreported notes that token's work ran but its report got no answer.
func (s *leaseSet) unreported(token string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ran = append(s.ran, token)
	if len(s.ran) > s.keep {
		s.ran = s.ran[len(s.ran)-s.keep:]
	}
}

// busy reports whether any lease is held (queued, running, or reporting).
func (s *leaseSet) busy() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.active) > 0
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
