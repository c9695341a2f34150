package merge

import "math"

// myers marks the changed lines of a and b (ca, cb) with Myers' algorithm:
// linear space, by bisection at a middle snake. Diagonals are numbered
// k = x - y, x indexing a and y indexing b.
type myers struct {
	a, b     []int
	ca, cb   []bool
	fwd, bwd []int // furthest x reached per diagonal, at index k+off
	off      int
	maxCost  int
}

func newMyers(a, b []int) *myers {
	n := len(a) + len(b) + 3
	cost := 1
	for v := n; v > 0; v >>= 2 {
		cost <<= 1
	}
	return &myers{
		a: a, b: b, ca: make([]bool, len(a)), cb: make([]bool, len(b)),
		fwd: make([]int, n), bwd: make([]int, n), off: len(b) + 1,
		maxCost: max(cost, 256),
	}
}

// cmp marks the changes of a[x0:x1] against b[y0:y1]. With exact set, the
// search may not stop early at maxCost (that half is known to be cheap).
func (m *myers) cmp(x0, x1, y0, y1 int, exact bool) {
	for x0 < x1 && y0 < y1 && m.a[x0] == m.b[y0] {
		x0++
		y0++
	}
	for x0 < x1 && y0 < y1 && m.a[x1-1] == m.b[y1-1] {
		x1--
		y1--
	}
	switch {
	case x0 == x1:
		for ; y0 < y1; y0++ {
			m.cb[y0] = true
		}
	case y0 == y1:
		for ; x0 < x1; x0++ {
			m.ca[x0] = true
		}
	default:
		x, y, exactLo, exactHi := m.split(x0, x1, y0, y1, exact)
		m.cmp(x0, x, y0, y, exactLo)
		m.cmp(x, x1, y, y1, exactHi)
	}
}

// split finds where an edit path through a[x0:x1], b[y0:y1] crosses from
// the forward search to the backward one, scanning the diagonals of each
// step from high to low and preferring a deletion on ties. Past maxCost
// (unless exact), it takes the furthest point either search reached; the
// half that search explored is then known to be cheap and is diffed
// exactly.
func (m *myers) split(x0, x1, y0, y1 int, exact bool) (x, y int, exactLo, exactHi bool) {
	a, b, f, r, o := m.a, m.b, m.fwd, m.bwd, m.off
	kmin, kmax := x0-y1, x1-y0
	fmid, bmid := x0-y0, x1-y1
	odd := (fmid-bmid)&1 != 0
	fmin, fmax, bmin, bmax := fmid, fmid, bmid, bmid
	f[o+fmid], r[o+bmid] = x0, x1
	for cost := 1; ; cost++ {
		if fmin > kmin {
			fmin--
			f[o+fmin-1] = -1
		} else {
			fmin++
		}
		if fmax < kmax {
			fmax++
			f[o+fmax+1] = -1
		} else {
			fmax--
		}
		for k := fmax; k >= fmin; k -= 2 {
			x := f[o+k+1]
			if f[o+k-1] >= f[o+k+1] {
				x = f[o+k-1] + 1
			}
			y := x - k
			for x < x1 && y < y1 && a[x] == b[y] {
				x++
				y++
			}
			f[o+k] = x
			if odd && bmin <= k && k <= bmax && r[o+k] <= x {
				return x, y, true, true
			}
		}
		if bmin > kmin {
			bmin--
			r[o+bmin-1] = math.MaxInt
		} else {
			bmin++
		}
		if bmax < kmax {
			bmax++
			r[o+bmax+1] = math.MaxInt
		} else {
			bmax--
		}
		for k := bmax; k >= bmin; k -= 2 {
			x := r[o+k+1] - 1
			if r[o+k-1] < r[o+k+1] {
				x = r[o+k-1]
			}
			y := x - k
			for x > x0 && y > y0 && a[x-1] == b[y-1] {
				x--
				y--
			}
			r[o+k] = x
			if !odd && fmin <= k && k <= fmax && x <= f[o+k] {
				return x, y, true, true
			}
		}
		if !exact && cost >= m.maxCost {
			return m.furthest(x0, x1, y0, y1, fmin, fmax, bmin, bmax)
		}
	}
}

// furthest is split's way out of a long search: the point of either
// search that got furthest along its direction.
func (m *myers) furthest(x0, x1, y0, y1, fmin, fmax, bmin, bmax int) (x, y int, exactLo, exactHi bool) {
	f, r, o := m.fwd, m.bwd, m.off
	fbest, fx := -1, -1
	for k := fmax; k >= fmin; k -= 2 {
		x := min(f[o+k], x1)
		y := x - k
		if y1 < y {
			x, y = y1+k, y1
		}
		if fbest < x+y {
			fbest, fx = x+y, x
		}
	}
	bbest, bx := math.MaxInt, math.MaxInt
	for k := bmax; k >= bmin; k -= 2 {
		x := max(x0, r[o+k])
		y := x - k
		if y < y0 {
			x, y = y0+k, y0
		}
		if x+y < bbest {
			bbest, bx = x+y, x
		}
	}
	if (x1+y1)-bbest < fbest-(x0+y0) {
		return fx, fbest - fx, true, false
	}
	return bx, bbest - bx, false, true
}
