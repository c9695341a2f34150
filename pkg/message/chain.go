package message

import (
	"fmt"
	"sync"
	"time"
)

const chainTimeLayout = "20060102150405"

// ValidChain reports whether s is a chain id: 16 ASCII digits, the first 14
// a real UTC date and time (YYYYMMDDHHMMSS, year 1000 or later), the last 2
// a counter.
func ValidChain(s string) bool {
	_, _, ok := splitChain(s)
	return ok
}

func splitChain(s string) (time.Time, int, bool) {
	if len(s) != 16 || s[0] == '0' {
		return time.Time{}, 0, false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return time.Time{}, 0, false
		}
	}
	// By hand rather than time.Parse: a store opening a long queue checks
	// every name. time.Date normalises out-of-range fields, so a field that
	// does not survive the round trip was out of range.
	num := func(i, n int) int {
		v := 0
		for _, c := range s[i : i+n] {
			v = v*10 + int(c-'0')
		}
		return v
	}
	y, mo, d, h, mi, se := num(0, 4), num(4, 2), num(6, 2), num(8, 2), num(10, 2), num(12, 2)
	if mo < 1 || mo > 12 || d < 1 || h > 23 || mi > 59 || se > 59 {
		return time.Time{}, 0, false
	}
	t := time.Date(y, time.Month(mo), d, h, mi, se, 0, time.UTC)
	if t.Day() != d || int(t.Month()) != mo {
		return time.Time{}, 0, false
	}
	return t, num(14, 2), true
}

// ChainGen hands out chain ids: the UTC time to the second and a 2-digit
// counter. Ids are strictly increasing for the life of the generator: more
// than 100 ids in one second borrow the following second, a clock that goes
// back never produces a smaller id, and ids given to Observe (those already
// on disk when a controller restarts) are never reached again.
// It is safe for concurrent use.
type ChainGen struct {
	now func() time.Time

	mu      sync.Mutex
	last    time.Time // second of the last id handed out or observed
	counter int       // counter of that id
	any     bool

	floor     func() // observes the ids that exist (SetFloor)
	floorOnce sync.Once
}

// SetFloor gives the generator a function that Observes every id already
// in use; it runs once, before the first Next. Looking for the ids in use
// costs a listing of the project's queue and history, which a process
// that never makes a chain (status) then does not pay. Call it before the
// generator is shared.
func (g *ChainGen) SetFloor(observe func()) { g.floor = observe }

// NewChainGen returns a generator reading the clock now (time.Now when nil).
func NewChainGen(now func() time.Time) *ChainGen {
	if now == nil {
		now = time.Now
	}
	return &ChainGen{now: now}
}

// Next returns a new chain id, greater than every id returned or observed
// before.
func (g *ChainGen) Next() string {
	if g.floor != nil {
		g.floorOnce.Do(g.floor)
	}
	sec := g.now().UTC().Truncate(time.Second)
	g.mu.Lock()
	defer g.mu.Unlock()
	switch {
	case !g.any || sec.After(g.last):
		g.last, g.counter = sec, 0
	case g.counter < 99:
		g.counter++
	default:
		g.last, g.counter = g.last.Add(time.Second), 0
	}
	g.any = true
	return formatChain(g.last, g.counter)
}

// Observe records an existing chain id so that Next never returns it or
// anything below it. Invalid ids are ignored.
func (g *ChainGen) Observe(chain string) {
	t, c, ok := splitChain(chain)
	if !ok {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.any || t.After(g.last) || (t.Equal(g.last) && c > g.counter) {
		g.last, g.counter, g.any = t, c, true
	}
}

func formatChain(t time.Time, counter int) string {
	return t.Format(chainTimeLayout) + fmt.Sprintf("%02d", counter)
}
