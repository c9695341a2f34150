package supervisor

import (
	"sync"
	"time"
)

// Lease is the deadline an attempt may run until; the worker extends it
// whenever the controller renews the attempt's lease. Every supervisor
// started with it follows the extensions and kills its tree when the
// deadline passes. It is safe for concurrent use.
type Lease struct {
	mu       sync.Mutex
	deadline int64 // CLOCK_MONOTONIC ns
	changed  chan struct{}
}

// NewLease returns a lease valid until until.
func NewLease(until time.Time) *Lease {
	return &Lease{deadline: monoOf(until), changed: make(chan struct{})}
}

// Extend moves the deadline to until when that is later.
func (l *Lease) Extend(until time.Time) {
	l.set(monoOf(until), false)
}

// Expire ends the lease now: supervisors following it kill their trees.
func (l *Lease) Expire() { l.set(monoNow(), true) }

// Remaining is the time left until the deadline (negative when passed).
func (l *Lease) Remaining() time.Duration {
	d, _ := l.current()
	return time.Duration(d - monoNow())
}

func (l *Lease) set(mono int64, force bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !force && mono <= l.deadline {
		return
	}
	l.deadline = mono
	close(l.changed)
	l.changed = make(chan struct{})
}

func (l *Lease) current() (int64, <-chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.deadline, l.changed
}

// NewLeaseMonotonic returns a lease valid until ns, a CLOCK_MONOTONIC time
// of this machine (a deadline passed between processes, as to a driver
// plugin).
func NewLeaseMonotonic(ns int64) *Lease {
	return &Lease{deadline: ns, changed: make(chan struct{})}
}

// ExtendMonotonic moves the deadline to ns (CLOCK_MONOTONIC) when later.
func (l *Lease) ExtendMonotonic(ns int64) { l.set(ns, false) }

// Watch returns the deadline (CLOCK_MONOTONIC ns) and a channel closed at
// its next change.
func (l *Lease) Watch() (ns int64, changed <-chan struct{}) { return l.current() }
