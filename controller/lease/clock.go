package lease

import "time"

// Clock is the time source of a Manager: lease expiry, session liveness
// and the fence delay all read it. Tests pass a manual clock so that a
// lease's loss is observed without waiting for its TTL.
type Clock interface {
	Now() time.Time
	// AfterFunc calls f in its own goroutine once d has passed.
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is a pending AfterFunc call.
type Timer interface {
	// Stop prevents the call; false when it already ran or was stopped.
	Stop() bool
	// Reset makes the call happen d from now (again).
	Reset(d time.Duration) bool
}

// realClock is the wall clock.
type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

func (realClock) AfterFunc(d time.Duration, f func()) Timer { return time.AfterFunc(d, f) }
