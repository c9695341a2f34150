package merge

// This file is the two-way line diff under the three-way merge. It makes
// the choices git's xdiff makes, because where a change sits decides
// whether it touches the other side's change, and so whether a merge is
// clean: among the many minimal diffs of texts with repeated lines, the
// one git picks. It is written from the published algorithms, not from
// git's code:
//   - the common prefix and suffix are set aside; then a line that does not
//     occur in the other file at all is changed outright, and so is a line
//     that occurs very often there (about 2*sqrt(n) times) when it stands in
//     a run of such lines (GNU diff's "discard confusing lines");
//   - the rest is Myers' O(ND) bisection (forward and backward searches
//     meeting in a middle snake), scanning diagonals from high to low and
//     preferring a deletion on ties; past a cost of max(256, 2*sqrt(lines))
//     a search stops at the furthest point reached, bounding the time on
//     unrelated texts;
//   - last, change compaction (compact.go).
// Diffs of texts with such long searches can still differ from git's.

// hunk replaces base[B0:B1] by side[S0:S1].
type hunk struct {
	B0, B1, S0, S1 int
}

// lineIDs maps lines to integers, equal lines to equal integers, across
// all the given files.
func lineIDs(files ...[]string) [][]int {
	ids := map[string]int{}
	out := make([][]int, len(files))
	for f, lines := range files {
		out[f] = make([]int, len(lines))
		for i, l := range lines {
			id, ok := ids[l]
			if !ok {
				id = len(ids)
				ids[l] = id
			}
			out[f][i] = id
		}
	}
	return out
}

// diffHunks returns the changes turning a into b, in order.
func diffHunks(a, b []int) []hunk {
	// ca and cb mark changed lines, with a false sentinel at each end:
	// index i+1 is line i.
	ca, cb := make([]bool, len(a)+2), make([]bool, len(b)+2)
	pre := 0
	for pre < len(a) && pre < len(b) && a[pre] == b[pre] {
		pre++
	}
	suf := 0
	for suf < len(a)-pre && suf < len(b)-pre && a[len(a)-1-suf] == b[len(b)-1-suf] {
		suf++
	}
	ka, ia := keep(a, b, pre, len(a)-suf, ca)
	kb, ib := keep(b, a, pre, len(b)-suf, cb)
	m := newMyers(ka, kb)
	m.cmp(0, len(ka), 0, len(kb), false)
	for i, c := range m.ca {
		if c {
			ca[ia[i]+1] = true
		}
	}
	for i, c := range m.cb {
		if c {
			cb[ib[i]+1] = true
		}
	}
	compact(a, ca, cb)
	compact(b, cb, ca)
	return buildHunks(ca, cb, len(a), len(b))
}

// keep returns the lines of x[lo:hi] worth searching for in y, and their
// indexes in x; it marks the others changed in ch (offset by one). A line
// not in y is changed; a line found in y at least about 2*sqrt(len(x))
// times is changed when it stands among lines that are changed, mostly
// lines not in y.
func keep(x, y []int, lo, hi int, ch []bool) (ids, idx []int) {
	inY := map[int]int{}
	for _, v := range y {
		inY[v]++
	}
	limit := 1
	for n := len(x); n > 0; n >>= 2 {
		limit <<= 1
	}
	limit = min(limit, 1024)
	class := make([]byte, hi-lo) // 0: not in y, 1: keep, 2: too common
	for i := lo; i < hi; i++ {
		switch n := inY[x[i]]; {
		case n == 0:
		case n >= limit:
			class[i-lo] = 2
		default:
			class[i-lo] = 1
		}
	}
	for i := lo; i < hi; i++ {
		c := class[i-lo]
		if c == 1 || (c == 2 && !confusing(class, i-lo)) {
			ids = append(ids, x[i])
			idx = append(idx, i)
		} else {
			ch[i+1] = true
		}
	}
	return ids, idx
}

// confusing reports whether the too-common line i stands in a run of
// lines not worth searching for (within 100 lines either side) with lines
// absent from the other file on both sides, and at most a quarter of the
// run too-common lines.
func confusing(class []byte, i int) bool {
	const window = 100
	lo, hi := max(0, i-window), min(len(class)-1, i+window)
	run := func(step, stop int) (absent, common int) {
		common = 1
		for j := i + step; (step < 0 && j >= stop) || (step > 0 && j <= stop); j += step {
			switch class[j] {
			case 0:
				absent++
			case 2:
				common++
			default:
				return
			}
		}
		return
	}
	absent0, common0 := run(-1, lo)
	if absent0 == 0 {
		return false
	}
	absent1, common1 := run(1, hi)
	if absent1 == 0 {
		return false
	}
	common := common0 + common1
	return common*4 < common+absent0+absent1
}

// buildHunks turns the changed-line marks of both files into hunks: runs
// of changed lines, paired up through the unchanged lines between them.
func buildHunks(ca, cb []bool, na, nb int) []hunk {
	var out []hunk
	i, j := 0, 0
	for i < na || j < nb {
		if !ca[i+1] && !cb[j+1] {
			i++
			j++
			continue
		}
		h := hunk{B0: i, S0: j}
		for i < na && ca[i+1] {
			i++
		}
		for j < nb && cb[j+1] {
			j++
		}
		h.B1, h.S1 = i, j
		out = append(out, h)
	}
	return out
}
