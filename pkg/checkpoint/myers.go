package checkpoint

// This file is a line diff: Myers' O(ND) algorithm in its linear-space form
// (bisection at the middle snake, as in Myers 1986 section 4b and
// diff-match-patch), on lines mapped to integers, with common prefixes and
// suffixes trimmed at every level. go-udiff's lcs package was not used: it
// caps its search depth, so 500 scattered edits in a 50,000-line file come
// out as a few huge replaced blocks.

// lineEdit replaces a[Start:End] by b[ReplStart:ReplEnd].
type lineEdit struct {
	Start, End, ReplStart, ReplEnd int
}

// maxSnakeD bounds the search for one middle snake; past it the range is
// treated as replaced wholesale (only for inputs with no useful common
// lines, where that is also the best diff to read).
const maxSnakeD = 8192

// diffLines returns the edits turning a into b, in order.
func diffLines(a, b []string) []lineEdit {
	ids := make(map[string]int, len(a)+len(b))
	ai := make([]int, len(a))
	bi := make([]int, len(b))
	for i, l := range a {
		id, ok := ids[l]
		if !ok {
			id = len(ids)
			ids[l] = id
		}
		ai[i] = id
	}
	for i, l := range b {
		id, ok := ids[l]
		if !ok {
			id = len(ids)
			ids[l] = id
		}
		bi[i] = id
	}
	d := &differ{a: ai, b: bi}
	d.diff(0, len(ai), 0, len(bi))
	return d.edits
}

type differ struct {
	a, b   []int
	edits  []lineEdit
	v1, v2 []int // scratch, reused across calls
}

func (d *differ) add(a0, a1, b0, b1 int) {
	if a0 == a1 && b0 == b1 {
		return
	}
	if n := len(d.edits); n > 0 && d.edits[n-1].End == a0 && d.edits[n-1].ReplEnd == b0 {
		d.edits[n-1].End, d.edits[n-1].ReplEnd = a1, b1
		return
	}
	d.edits = append(d.edits, lineEdit{a0, a1, b0, b1})
}

// diff appends the edits for a[a0:a1] -> b[b0:b1], in order.
func (d *differ) diff(a0, a1, b0, b1 int) {
	for a0 < a1 && b0 < b1 && d.a[a0] == d.b[b0] {
		a0++
		b0++
	}
	for a0 < a1 && b0 < b1 && d.a[a1-1] == d.b[b1-1] {
		a1--
		b1--
	}
	if a0 == a1 || b0 == b1 {
		d.add(a0, a1, b0, b1)
		return
	}
	x, y, ok := d.bisect(a0, a1, b0, b1)
	if !ok {
		d.add(a0, a1, b0, b1)
		return
	}
	d.diff(a0, x, b0, y)
	d.diff(x, a1, y, b1)
}

// bisect finds the middle snake of a[a0:a1] vs b[b0:b1] and returns a split
// point (absolute indexes) strictly inside the problem.
func (d *differ) bisect(a0, a1, b0, b1 int) (int, int, bool) {
	a, b := d.a[a0:a1], d.b[b0:b1]
	n, m := len(a), len(b)
	maxD := (n + m + 1) / 2
	if maxD > maxSnakeD {
		maxD = maxSnakeD
	}
	off := maxD + 1
	size := 2*maxD + 3
	if cap(d.v1) < size {
		d.v1 = make([]int, size)
		d.v2 = make([]int, size)
	}
	v1, v2 := d.v1[:size], d.v2[:size]
	for i := range v1 {
		v1[i] = -1
		v2[i] = -1
	}
	v1[off+1], v2[off+1] = 0, 0
	delta := n - m
	front := delta%2 != 0
	k1start, k1end, k2start, k2end := 0, 0, 0, 0
	for dd := 0; dd < maxD; dd++ {
		for k1 := -dd + k1start; k1 <= dd-k1end; k1 += 2 {
			i := off + k1
			var x1 int
			if k1 == -dd || (k1 != dd && v1[i-1] < v1[i+1]) {
				x1 = v1[i+1]
			} else {
				x1 = v1[i-1] + 1
			}
			y1 := x1 - k1
			for x1 < n && y1 < m && a[x1] == b[y1] {
				x1++
				y1++
			}
			v1[i] = x1
			switch {
			case x1 > n:
				k1end += 2
			case y1 > m:
				k1start += 2
			case front:
				j := off + delta - k1
				if j >= 0 && j < size && v2[j] != -1 && x1 >= n-v2[j] {
					return a0 + x1, b0 + y1, true
				}
			}
		}
		for k2 := -dd + k2start; k2 <= dd-k2end; k2 += 2 {
			i := off + k2
			var x2 int
			if k2 == -dd || (k2 != dd && v2[i-1] < v2[i+1]) {
				x2 = v2[i+1]
			} else {
				x2 = v2[i-1] + 1
			}
			y2 := x2 - k2
			for x2 < n && y2 < m && a[n-x2-1] == b[m-y2-1] {
				x2++
				y2++
			}
			v2[i] = x2
			switch {
			case x2 > n:
				k2end += 2
			case y2 > m:
				k2start += 2
			case !front:
				j := off + delta - k2
				if j >= 0 && j < size && v1[j] != -1 {
					x1 := v1[j]
					y1 := x1 - (j - off)
					if x1 >= n-x2 {
						return a0 + x1, b0 + y1, true
					}
				}
			}
		}
	}
	return 0, 0, false
}
