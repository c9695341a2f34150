package lease

import (
	"sync"
	"time"
)

// manualClock is a Clock that moves only when Advance is called; due
// timers fire (in their own goroutines) during Advance.
type manualClock struct {
	mu     sync.Mutex
	now    time.Time
	timers []*manualTimer
}

type manualTimer struct {
	c    *manualClock
	at   time.Time
	f    func()
	live bool
}

func newManualClock() *manualClock {
	return &manualClock{now: time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)}
}

func (c *manualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *manualClock) AfterFunc(d time.Duration, f func()) Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &manualTimer{c: c, at: c.now.Add(d), f: f, live: true}
	c.timers = append(c.timers, t)
	return t
}

// Advance moves the clock by d and runs the timers that became due, one
// after the other, waiting for each (so a test sees their effects).
func (c *manualClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	var due []*manualTimer
	for _, t := range c.timers {
		if t.live && !t.at.After(c.now) {
			t.live = false
			due = append(due, t)
		}
	}
	c.mu.Unlock()
	for _, t := range due {
		t.f()
	}
}

func (t *manualTimer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	was := t.live
	t.live = false
	return was
}

func (t *manualTimer) Reset(d time.Duration) bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	was := t.live
	t.at = t.c.now.Add(d)
	t.live = true
	return was
}
