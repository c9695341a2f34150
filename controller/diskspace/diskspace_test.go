package diskspace

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
)

// fakeFree is an injected statfs: the free space the test sets.
type fakeFree struct {
	free uint64
	err  error
}

func (f *fakeFree) get(string) (uint64, error) { return f.free, f.err }

func TestCheckReportsEachChangeOnce(t *testing.T) {
	f := &fakeFree{free: 100 << 20}
	m := New("/project", Options{MinFree: 64 << 20, Free: f.get})
	steps := []struct {
		free        uint64
		wantFull    bool
		wantChanged bool
	}{
		{100 << 20, false, false},
		{10 << 20, true, true},
		{5 << 20, true, false},
		{63 << 20, true, false},
		{64 << 20, false, true},
		{80 << 20, false, false},
	}
	for i, s := range steps {
		f.free = s.free
		st, changed := m.Check()
		if st.Full != s.wantFull || changed != s.wantChanged {
			t.Fatalf("step %d (%d free): full %v changed %v, want %v %v", i, s.free, st.Full, changed, s.wantFull, s.wantChanged)
		}
	}
	f.free = 1 << 20
	st, _ := m.Check()
	if s := st.String(); !strings.Contains(s, "the disk holding /project is full: 1.0 MiB available, at least 64.0 MiB needed") {
		t.Errorf("message %q", s)
	}
}

// A write that failed with ENOSPC although statfs showed enough space
// (quota, reserved blocks) keeps the state full until the space grows.
func TestMarkFullStaysUntilSpaceGrows(t *testing.T) {
	f := &fakeFree{free: 100 << 20}
	m := New("/p", Options{MinFree: 1 << 20, Free: f.get})
	if _, changed := m.MarkFull(); !changed {
		t.Fatal("MarkFull did not change the state")
	}
	if st, changed := m.Check(); !st.Full || changed {
		t.Fatalf("same free space after MarkFull: full %v changed %v, want still full", st.Full, changed)
	}
	f.free = 101 << 20
	if st, changed := m.Check(); st.Full || !changed {
		t.Fatalf("more space: full %v changed %v, want not full, changed", st.Full, changed)
	}
}

func TestCheckKeepsStateOnStatfsError(t *testing.T) {
	f := &fakeFree{free: 1}
	m := New("/p", Options{MinFree: 10, Free: f.get})
	m.Check()
	f.err = errors.New("boom")
	st, changed := m.Check()
	if !st.Full || changed || st.Err == nil {
		t.Fatalf("statfs error: %+v changed %v", st, changed)
	}
}

func TestIsNoSpace(t *testing.T) {
	if !IsNoSpace(fmt.Errorf("write x: %w", &os.PathError{Op: "write", Path: "x", Err: syscall.ENOSPC})) {
		t.Error("ENOSPC not recognised")
	}
	if !IsNoSpace(syscall.EDQUOT) || IsNoSpace(syscall.EACCES) || IsNoSpace(nil) {
		t.Error("EDQUOT/EACCES/nil misclassified")
	}
}

func TestStatfsOfARealDirectory(t *testing.T) {
	m := New(t.TempDir(), Options{MinFree: 1})
	if st, _ := m.Check(); st.Err != nil || st.Free == 0 {
		t.Fatalf("statfs of a temp dir: %+v", st)
	}
}
