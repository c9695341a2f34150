//go:build linux

package logbook

import (
	"errors"
	"syscall"
	"testing"
	"time"
)

// A log write that fails (here on /dev/full, which answers every write
// with ENOSPC) is reported to Options.WriteFailed, as well as returned.
func TestWriteFailedIsReported(t *testing.T) {
	got := make(chan error, 4)
	b := NewWithOptions(func(Key) (string, error) { return "/dev/full", nil },
		Options{WriteFailed: func(_ Key, err error) { got <- err }})
	k := Key{MessageID: "2026010100000000-0", Attempt: 1, Stream: "routine"}
	b.Begin(k.MessageID, k.Attempt)
	defer b.End(k.MessageID, k.Attempt)
	if _, err := b.Append(k, 0, []byte("hello\n")); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("Append = %v, want ENOSPC", err)
	}
	select {
	case err := <-got:
		if !errors.Is(err, syscall.ENOSPC) {
			t.Errorf("reported %v, want ENOSPC", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the failed write was not reported")
	}
}
