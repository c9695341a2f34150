// Package backoff computes retry delays: exponential growth capped at a
// maximum, with "full jitter" (a uniformly random delay between zero and the
// cap), so that many workers losing the same controller do not come back in
// lock step.
package backoff

import (
	"context"
	"math/rand/v2"
	"time"
)

// Policy describes the delays. The zero value uses Min 200ms and Max 30s.
type Policy struct {
	// Min is the cap of the first retry's delay.
	Min time.Duration
	// Max is the largest cap.
	Max time.Duration
}

func (p Policy) norm() Policy {
	if p.Min <= 0 {
		p.Min = 200 * time.Millisecond
	}
	if p.Max <= 0 {
		p.Max = 30 * time.Second
	}
	if p.Max < p.Min {
		p.Max = p.Min
	}
	return p
}

// Cap is the upper bound of the delay before retry number n (from 0):
// Min * 2^n, at most Max.
func (p Policy) Cap(n int) time.Duration {
	p = p.norm()
	d := p.Min
	for i := 0; i < n && d < p.Max; i++ {
		d *= 2
	}
	if d > p.Max {
		d = p.Max
	}
	return d
}

// Delay is a random delay in [0, Cap(n)].
func (p Policy) Delay(n int) time.Duration {
	c := p.Cap(n)
	return time.Duration(rand.Int64N(int64(c) + 1))
}

// Sleep waits Delay(n), or until ctx ends (returning its error).
func (p Policy) Sleep(ctx context.Context, n int) error {
	t := time.NewTimer(p.Delay(n))
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
