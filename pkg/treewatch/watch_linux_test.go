package treewatch

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestDrain watches real directories with inotify and checks the paths
// each kind of change reports.
func TestDrain(t *testing.T) {
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	w, err := New(root, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	for _, d := range []string{"", "sub"} {
		if err := w.Add(d); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name string
		do   func() error
		want []string
	}{
		{"create", func() error { return os.WriteFile(filepath.Join(root, "sub", "a\nb"), []byte("x"), 0o644) }, []string{"sub/a\nb"}},
		{"chmod", func() error { return os.Chmod(filepath.Join(root, "sub", "a\nb"), 0o600) }, []string{"sub/a\nb"}},
		{"rename", func() error { return os.Rename(filepath.Join(root, "sub", "a\nb"), filepath.Join(root, "c")) }, []string{"c", "sub/a\nb"}},
		{"mkdir", func() error { return os.Mkdir(filepath.Join(root, "new"), 0o755) }, []string{"new"}},
		{"unwatched directory", func() error { return os.WriteFile(filepath.Join(root, "new", "f"), nil, 0o644) }, nil},
		{"remove directory", func() error { return os.RemoveAll(filepath.Join(root, "sub")) }, []string{"sub"}},
		{"nothing", func() error { return nil }, nil},
	}
	for _, tc := range tests {
		if err := tc.do(); err != nil {
			t.Fatal(err)
		}
		ch, err := w.Drain()
		if err != nil {
			t.Fatal(err)
		}
		slices.Sort(ch.Paths)
		if !slices.Equal(ch.Paths, tc.want) || ch.Overflow {
			t.Errorf("%s: got %q overflow=%v, want %q", tc.name, ch.Paths, ch.Overflow, tc.want)
		}
	}
	if n := w.Watched(); n != 1 {
		t.Errorf("after sub was removed %d directories are watched, want 1", n)
	}
	w.SimulateOverflow()
	if ch, err := w.Drain(); err != nil || !ch.Overflow {
		t.Errorf("SimulateOverflow: %+v %v", ch, err)
	}
	if err := os.Rename(root, root+".moved"); err != nil {
		t.Fatal(err)
	}
	defer os.Rename(root+".moved", root)
	if ch, err := w.Drain(); err != nil || !ch.Overflow {
		t.Errorf("root moved: %+v %v, want an overflow", ch, err)
	}
}

func TestMaxWatches(t *testing.T) {
	root := t.TempDir()
	for _, d := range []string{"a", "b"} {
		if err := os.Mkdir(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	w, err := New(root, Options{MaxWatches: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if err := w.Add(""); err != nil {
		t.Fatal(err)
	}
	if err := w.Add("a"); err != nil {
		t.Fatal(err)
	}
	if err := w.Add("a"); err != nil {
		t.Fatalf("adding a watched directory again: %v", err)
	}
	if err := w.Add("b"); !errors.Is(err, ErrLimit) {
		t.Fatalf("third watch: %v, want ErrLimit", err)
	}
}
