package backoff

import (
	"context"
	"testing"
	"time"
)

func TestCap(t *testing.T) {
	p := Policy{Min: 100 * time.Millisecond, Max: time.Second}
	tests := []struct {
		n    int
		want time.Duration
	}{
		{0, 100 * time.Millisecond},
		{1, 200 * time.Millisecond},
		{2, 400 * time.Millisecond},
		{3, 800 * time.Millisecond},
		{4, time.Second},
		{100, time.Second},
	}
	for _, tt := range tests {
		if got := p.Cap(tt.n); got != tt.want {
			t.Errorf("Cap(%d) = %v, want %v", tt.n, got, tt.want)
		}
	}
}

func TestDelayIsFullJitter(t *testing.T) {
	p := Policy{Min: 10 * time.Millisecond, Max: 80 * time.Millisecond}
	var low, high bool
	for i := 0; i < 2000; i++ {
		d := p.Delay(3)
		if d < 0 || d > 80*time.Millisecond {
			t.Fatalf("Delay(3) = %v, outside [0, 80ms]", d)
		}
		if d < 20*time.Millisecond {
			low = true
		}
		if d > 60*time.Millisecond {
			high = true
		}
	}
	if !low || !high {
		t.Errorf("2000 delays did not spread over [0, cap]: saw low=%v high=%v", low, high)
	}
}

func TestZeroPolicyDefaults(t *testing.T) {
	var p Policy
	if got := p.Cap(0); got != 200*time.Millisecond {
		t.Errorf("zero policy Cap(0) = %v, want 200ms", got)
	}
	if got := p.Cap(50); got != 30*time.Second {
		t.Errorf("zero policy Cap(50) = %v, want 30s", got)
	}
}

func TestSleepHonoursContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	p := Policy{Min: time.Hour, Max: time.Hour}
	if err := p.Sleep(ctx, 0); err != context.Canceled {
		t.Errorf("Sleep on a cancelled context = %v, want context.Canceled", err)
	}
}
