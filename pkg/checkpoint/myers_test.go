package checkpoint

import (
	"math/rand"
	"testing"
)

// lcsLen is the textbook O(NM) longest common subsequence length.
func lcsLen(a, b []string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for i := 1; i <= len(a); i++ {
		for j := 1; j <= len(b); j++ {
			switch {
			case a[i-1] == b[j-1]:
				cur[j] = prev[j-1] + 1
			case prev[j] > cur[j-1]:
				cur[j] = prev[j]
			default:
				cur[j] = cur[j-1]
			}
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// TestDiffLinesMinimalAndCorrect: on random inputs the edits rebuild b from
// a and are minimal (as many lines kept as the LCS).
func TestDiffLinesMinimalAndCorrect(t *testing.T) {
	r := rand.New(rand.NewSource(3))
	alphabet := []string{"a\n", "b\n", "c\n", "d\n", "e"}
	gen := func() []string {
		s := make([]string, r.Intn(40))
		for i := range s {
			s[i] = alphabet[r.Intn(len(alphabet))]
		}
		return s
	}
	for iter := 0; iter < 3000; iter++ {
		a, b := gen(), gen()
		edits := diffLines(a, b)
		var out []string
		pos, kept := 0, 0
		for i, e := range edits {
			if e.Start < pos || e.End < e.Start || (i > 0 && e.Start == edits[i-1].End && e.ReplStart == edits[i-1].ReplEnd) {
				t.Fatalf("bad edit order %+v", edits)
			}
			out = append(out, a[pos:e.Start]...)
			kept += e.Start - pos
			out = append(out, b[e.ReplStart:e.ReplEnd]...)
			pos = e.End
		}
		kept += len(a) - pos
		out = append(out, a[pos:]...)
		if len(out) != len(b) {
			t.Fatalf("edits rebuild %d lines, want %d", len(out), len(b))
		}
		for i := range out {
			if out[i] != b[i] {
				t.Fatalf("edits rebuild %q, want %q", out, b)
			}
		}
		if want := lcsLen(a, b); kept != want {
			t.Fatalf("kept %d lines, LCS is %d: not minimal\na=%q\nb=%q", kept, want, a, b)
		}
	}
}
