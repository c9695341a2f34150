package merge

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
)

// span is a range of base lines, [B0, B1), where both sides changed the
// text differently.
type span struct{ B0, B1 int }

// splitLines splits data into lines that keep their "\n" (and "\r\n"); a
// last line without "\n" is a line of its own, so "a" and "a\n" differ as
// they do for git.
func splitLines(data []byte) []string {
	var out []string
	for len(data) > 0 {
		n := bytes.IndexByte(data, '\n') + 1
		if n == 0 {
			n = len(data)
		}
		out = append(out, string(data[:n]))
		data = data[n:]
	}
	return out
}

// text3 merges the line changes of ours and theirs from base, as `git
// merge-file` does: the changes of each side against base are hunks;
// hunks of the two sides that overlap or touch (one ends on the line where
// the other starts, or both insert at one place) form a region, which is
// clean when both sides leave the same text in it and a conflict
// otherwise; every other hunk is taken from its side. It returns the merged
// text, or the regions in conflict.
func text3(base, ours, theirs []byte) ([]byte, []span) {
	bl, ol, tl := splitLines(base), splitLines(ours), splitLines(theirs)
	ids := lineIDs(bl, ol, tl)
	h1, h2 := diffHunks(ids[0], ids[1]), diffHunks(ids[0], ids[2])
	var out strings.Builder
	var conflicts []span
	pos, i, j := 0, 0, 0
	for i < len(h1) || j < len(h2) {
		i0, j0 := i, j
		var r span
		if j >= len(h2) || (i < len(h1) && h1[i].B0 <= h2[j].B0) {
			r = span{h1[i].B0, h1[i].B1}
			i++
		} else {
			r = span{h2[j].B0, h2[j].B1}
			j++
		}
		for {
			if i < len(h1) && h1[i].B0 <= r.B1 {
				r.B1 = max(r.B1, h1[i].B1)
				i++
			} else if j < len(h2) && h2[j].B0 <= r.B1 {
				r.B1 = max(r.B1, h2[j].B1)
				j++
			} else {
				break
			}
		}
		for _, l := range bl[pos:r.B0] {
			out.WriteString(l)
		}
		pos = r.B1
		mine := sideText(bl, ol, h1[i0:i], r)
		if j == j0 {
			writeLines(&out, mine)
			continue
		}
		yours := sideText(bl, tl, h2[j0:j], r)
		switch {
		case i == i0:
			writeLines(&out, yours)
		case slices.Equal(mine, yours):
			writeLines(&out, mine)
		default:
			conflicts = append(conflicts, r)
		}
	}
	if len(conflicts) > 0 {
		return nil, conflicts
	}
	writeLines(&out, bl[pos:])
	return []byte(out.String()), nil
}

// sideText is one side's text for the base lines of r, given that side's
// hunks inside r.
func sideText(base, side []string, hs []hunk, r span) []string {
	var out []string
	p := r.B0
	for _, h := range hs {
		out = append(out, base[p:h.B0]...)
		out = append(out, side[h.S0:h.S1]...)
		p = h.B1
	}
	return append(out, base[p:r.B1]...)
}

func writeLines(b *strings.Builder, lines []string) {
	for _, l := range lines {
		b.WriteString(l)
	}
}

// describeSpans says where both sides changed the text, in base line
// numbers: "both changed lines 3-4", "both changed line 7 and lines
// 10-12", "both inserted lines after line 5".
func describeSpans(spans []span) string {
	parts := make([]string, len(spans))
	inserts := true
	for i, s := range spans {
		switch {
		case s.B0 == s.B1 && s.B0 == 0:
			parts[i] = "at the start"
		case s.B0 == s.B1:
			parts[i] = fmt.Sprintf("after line %d", s.B0)
		case s.B1 == s.B0+1:
			parts[i] = fmt.Sprintf("line %d", s.B1)
			inserts = false
		default:
			parts[i] = fmt.Sprintf("lines %d-%d", s.B0+1, s.B1)
			inserts = false
		}
	}
	list := parts[0]
	if n := len(parts); n > 1 {
		list = strings.Join(parts[:n-1], ", ") + " and " + parts[n-1]
	}
	if inserts {
		return "both inserted different lines " + list
	}
	return "both changed " + list
}
