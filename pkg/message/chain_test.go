package message

import (
	"sync"
	"testing"
	"time"
)

type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time  { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) set(t time.Time) { c.mu.Lock(); c.t = t; c.mu.Unlock() }

func TestChainGenFirstIDs(t *testing.T) {
	clk := &fakeClock{t: time.Date(2025, 2, 25, 14, 32, 0, 500, time.UTC)}
	g := NewChainGen(clk.now)
	for i, want := range []string{"2025022514320000", "2025022514320001", "2025022514320002"} {
		if got := g.Next(); got != want {
			t.Fatalf("id %d = %s, want %s", i, got, want)
		}
	}
	clk.set(clk.t.Add(time.Second))
	if got := g.Next(); got != "2025022514320100" {
		t.Fatalf("new second should reset the counter, got %s", got)
	}
}

func TestChainGenZoneIsUTC(t *testing.T) {
	zone := time.FixedZone("X", 5*3600)
	clk := &fakeClock{t: time.Date(2025, 2, 25, 19, 32, 0, 0, zone)}
	if got := NewChainGen(clk.now).Next(); got != "2025022514320000" {
		t.Fatalf("got %s, want the UTC time", got)
	}
}

func TestChainGenThousandInOneSecond(t *testing.T) {
	clk := &fakeClock{t: time.Date(2025, 12, 31, 23, 59, 59, 0, time.UTC)}
	g := NewChainGen(clk.now)
	prev := ""
	for i := 0; i < 1000; i++ {
		id := g.Next()
		if !ValidChain(id) {
			t.Fatalf("id %d %q is not a valid chain id", i, id)
		}
		if id <= prev {
			t.Fatalf("id %d %s not above %s", i, id, prev)
		}
		prev = id
	}
	// 1000 ids = 10 seconds' worth of counters (23:59:59, then 00:00:00 to
	// 00:00:08), crossing into the new year.
	if prev != "2026010100000899" {
		t.Fatalf("last id %s, want 2026010100000899", prev)
	}
	// While the real clock is still behind, the generator does not go back.
	clk.set(time.Date(2026, 1, 1, 0, 0, 5, 0, time.UTC))
	if id := g.Next(); id != "2026010100000900" {
		t.Fatalf("after catching up got %s", id)
	}
	clk.set(time.Date(2026, 1, 1, 0, 0, 30, 0, time.UTC))
	if id := g.Next(); id != "2026010100003000" {
		t.Fatalf("after the clock passed got %s", id)
	}
}

func TestChainGenClockGoesBack(t *testing.T) {
	clk := &fakeClock{t: time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)}
	g := NewChainGen(clk.now)
	a := g.Next()
	clk.set(clk.t.Add(-time.Hour))
	if b := g.Next(); b <= a {
		t.Fatalf("clock going back produced %s after %s", b, a)
	}
}

func TestChainGenObserve(t *testing.T) {
	clk := &fakeClock{t: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)}
	g := NewChainGen(clk.now)
	g.Observe("2030010100000042") // a future id already on disk
	g.Observe("2020010100000000") // an older one changes nothing
	g.Observe("not-a-chain")
	if got := g.Next(); got != "2030010100000043" {
		t.Fatalf("got %s, want 2030010100000043", got)
	}
	g.Observe("2030010100000099")
	if got := g.Next(); got != "2030010100000100" {
		t.Fatalf("after counter 99 got %s, want the next second", got)
	}
	// Observing an id in the present second that is above the last.
	g2 := NewChainGen(clk.now)
	g2.Observe("2025010100000005")
	if got := g2.Next(); got != "2025010100000006" {
		t.Fatalf("got %s", got)
	}
}

func TestChainGenConcurrent(t *testing.T) {
	clk := &fakeClock{t: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)}
	g := NewChainGen(clk.now)
	const workers, each = 8, 200
	var mu sync.Mutex
	seen := map[string]bool{}
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < each; i++ {
				id := g.Next()
				mu.Lock()
				if seen[id] {
					t.Errorf("duplicate id %s", id)
				}
				seen[id] = true
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(seen) != workers*each {
		t.Fatalf("got %d ids", len(seen))
	}
}

func TestValidChain(t *testing.T) {
	tests := map[string]bool{
		"2025022514320000":  true,
		"2025022514320099":  true,
		"202502251432000":   false,
		"20250225143200000": false,
		"2025022514320a00":  false,
		"2025022514326000":  false, // second 60
		"2025022414320000":  true,
		"2025023014320000":  false, // 30 February
		"0025022514320000":  false, // leading zero
		"":                  false,
	}
	for in, want := range tests {
		if got := ValidChain(in); got != want {
			t.Errorf("ValidChain(%q) = %v", in, got)
		}
	}
}

// The floor runs once, at the first Next, and the ids it observes are
// never handed out.
func TestChainGenFloorRunsOnceAtFirstNext(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	g := NewChainGen(func() time.Time { return now })
	calls := 0
	g.SetFloor(func() { calls++; g.Observe("2026010100000007") })
	if calls != 0 {
		t.Fatal("the floor ran before any id was asked for")
	}
	if got := g.Next(); got != "2026010100000008" {
		t.Errorf("first id = %s, want 2026010100000008", got)
	}
	if got := g.Next(); got != "2026010100000009" {
		t.Errorf("second id = %s, want 2026010100000009", got)
	}
	if calls != 1 {
		t.Errorf("the floor ran %d times, want 1", calls)
	}
}
