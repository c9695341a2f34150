//go:build linux

package checkpoint

import (
	"fmt"
	"math/rand"
	"path/filepath"
	"runtime"
	"slices"
	"testing"
)

// TestChangedSince changes a served tree (real files, real inotify) step
// by step and checks that ChangedSince, from the first manifest and from
// the previous one, lists every path Compare finds changed, and says when
// it does not know. Every manifest is kept alive (the history goes
// through weak pointers: a freed intermediate manifest ends it).
func TestChangedSince(t *testing.T) {
	root := filepath.Join(t.TempDir(), "tree")
	for i := 0; i < 40; i++ {
		write(t, root, fmt.Sprintf("d%d/f%d.txt", i%4, i), fmt.Sprintf("file %d\n", i))
	}
	cp := newCP(t)
	serve(t, cp, root)
	first := snapshot(t, cp, root) // walks: the start of the history
	if paths, ok := ChangedSince(first, first); !ok || len(paths) != 0 {
		t.Fatalf("ChangedSince(m, m) = %v, %v; want none, true", paths, ok)
	}
	r := rand.New(rand.NewSource(7))
	prev := first
	var all []*Manifest
	for step := 0; step < 12; step++ {
		for k := 0; k < 1+r.Intn(3); k++ {
			i := r.Intn(60)
			rel := fmt.Sprintf("d%d/f%d.txt", i%4, i)
			switch r.Intn(3) {
			case 0:
				rm(t, root, rel)
			case 1:
				write(t, root, rel, fmt.Sprintf("step %d\n", step))
			case 2:
				mklink(t, root, "target", fmt.Sprintf("d%d/l%d-%d", i%4, step, k))
			}
		}
		cur := snapshot(t, cp, root)
		all = append(all, cur)
		for _, base := range []*Manifest{first, prev} {
			paths, ok := ChangedSince(base, cur)
			if !ok {
				t.Fatalf("step %d: ChangedSince does not know the history of a served tree", step)
			}
			if !slices.IsSorted(paths) {
				t.Errorf("step %d: paths not sorted: %q", step, paths)
			}
			for _, ch := range Compare(base, cur) {
				if _, found := slices.BinarySearch(paths, ch.Path); !found {
					t.Errorf("step %d: %s changed but is not listed in %q", step, ch.Path, paths)
				}
			}
		}
		if _, ok := ChangedSince(cur, first); ok && cur != first {
			t.Errorf("step %d: ChangedSince claims to know a history backwards", step)
		}
		prev = cur
	}
	unrelated := &Manifest{Files: map[string]Entry{}}
	if _, ok := ChangedSince(unrelated, prev); ok {
		t.Error("ChangedSince claims to know the history from an unrelated manifest")
	}
	if _, ok := ChangedSince(nil, prev); ok {
		t.Error("ChangedSince(nil, m) claims to know")
	}
	runtime.KeepAlive(all)
}
