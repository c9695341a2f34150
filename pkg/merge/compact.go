package merge

// compact slides every group of changed lines of one file (lines, with
// its changed marks ch and the other file's marks other; both offset by
// one, with false sentinels) as git's xdl_change_compact does: up as far
// as it goes, then down as far as it goes (merging groups it meets), then
// back up to the last place where it lines up with a group of changes in
// the other file, if it passed one.
func compact(lines []int, ch, other []bool) {
	f := cfile{lines: lines, ch: ch}
	o := cfile{ch: other, n: len(other) - 2}
	f.n = len(lines)
	g, og := f.first(), o.first()
	for {
		if g.end != g.start {
			var earliestEnd, endMatchingOther int
			for {
				size := g.end - g.start
				endMatchingOther = -1
				for f.slideUp(&g) {
					o.prev(&og)
				}
				earliestEnd = g.end
				if og.end > og.start {
					endMatchingOther = g.end
				}
				for f.slideDown(&g) {
					o.next(&og)
					if og.end > og.start {
						endMatchingOther = g.end
					}
				}
				if size == g.end-g.start {
					break
				}
			}
			if g.end != earliestEnd && endMatchingOther != -1 {
				for og.end == og.start {
					f.slideUp(&g)
					o.prev(&og)
				}
			}
		}
		if !f.next(&g) {
			return
		}
		o.next(&og)
	}
}

// cfile is one file during compaction; a group is the run of changed
// lines [start, end) (possibly empty) between two unchanged lines.
type cfile struct {
	lines []int
	ch    []bool
	n     int
}

type group struct{ start, end int }

func (f *cfile) changed(line int) bool { return f.ch[line+1] }

func (f *cfile) set(line int, v bool) { f.ch[line+1] = v }

func (f *cfile) first() group {
	g := group{}
	for f.changed(g.end) {
		g.end++
	}
	return g
}

func (f *cfile) next(g *group) bool {
	if g.end == f.n {
		return false
	}
	g.start = g.end + 1
	g.end = g.start
	for f.changed(g.end) {
		g.end++
	}
	return true
}

func (f *cfile) prev(g *group) bool {
	if g.start == 0 {
		return false
	}
	g.end = g.start - 1
	g.start = g.end
	for f.changed(g.start - 1) {
		g.start--
	}
	return true
}

func (f *cfile) slideDown(g *group) bool {
	if g.end < f.n && f.lines[g.start] == f.lines[g.end] {
		f.set(g.start, false)
		f.set(g.end, true)
		g.start++
		g.end++
		for f.changed(g.end) {
			g.end++
		}
		return true
	}
	return false
}

func (f *cfile) slideUp(g *group) bool {
	if g.start > 0 && f.lines[g.start-1] == f.lines[g.end-1] {
		g.start--
		g.end--
		f.set(g.start, true)
		f.set(g.end, false)
		for f.changed(g.start - 1) {
			g.start--
		}
		return true
	}
	return false
}
