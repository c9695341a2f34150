package worker

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/decreehq/decree/pkg/supervisor"
)

// Work the controller stopped is killed early enough to be reported while
// its lease (no longer renewed) holds; other stops keep the full grace.
func TestKillGrace(t *testing.T) {
	const grace = 10 * time.Second
	for _, tc := range []struct {
		name     string
		cause    error
		left     time.Duration // the lease's remaining time; 0: no fence
		min, max time.Duration
	}{
		{"controller stop, lease of 10s", errStoppedByController, 10 * time.Second, 7*time.Second + 500*time.Millisecond, 8 * time.Second},
		{"controller stop, lease of 1s", errStoppedByController, time.Second, 600 * time.Millisecond, 800 * time.Millisecond},
		{"controller stop, lease of 60s", errStoppedByController, time.Minute, grace, grace},
		{"controller stop, lease over", errStoppedByController, -time.Second, 0, 0},
		{"controller stop, no fence", errStoppedByController, 0, grace, grace},
		{"worker shutdown", errors.New("the worker stops"), 10 * time.Second, grace, grace},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancelCause(context.Background())
			if tc.left != 0 {
				ctx = withFence(ctx, &supervisor.Fence{Lease: supervisor.NewLease(time.Now().Add(tc.left))})
			}
			cancel(tc.cause)
			if got := killGrace(ctx, grace); got < tc.min || got > tc.max {
				t.Errorf("killGrace = %s, want %s..%s", got, tc.min, tc.max)
			}
		})
	}
}
