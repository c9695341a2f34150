package events

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func ev(text string) *Event {
	return &Event{Kind: Warning, Text: text, Chain: "c"}
}

func collect(t *testing.T, w *Watcher) []*Event {
	t.Helper()
	var out []*Event
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for {
		e, err := w.Next(ctx)
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("Next: %v", err)
		}
		out = append(out, e)
	}
}

func TestSequencesSurviveRestartAndTornLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), FileName)
	l, err := Open(path, Options{Keep: 2})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 5; i++ {
		e, err := l.Append(ev("a"))
		if err != nil || e.Sequence != uint64(i+1) || e.Time.IsZero() {
			t.Fatalf("Append: %v %v", e, err)
		}
	}
	l.Close()
	// A crash while writing the sixth event leaves half a line.
	f, _ := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString(`{"sequence":6,"kind":"mess`)
	f.Close()

	l, err = Open(path, Options{Keep: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if l.Last() != 5 {
		t.Fatalf("Last = %d after reopen, want 5", l.Last())
	}
	e, err := l.Append(ev("b"))
	if err != nil || e.Sequence != 6 {
		t.Fatalf("Append after reopen: %v %v", e, err)
	}
	// Replay from the file (Keep is 2, so 1..4 come from disk).
	got := collect(t, l.Watch(WatchOptions{From: 2}))
	if len(got) != 5 {
		t.Fatalf("replayed %d events, want 5", len(got))
	}
	for i, e := range got {
		if e.Sequence != uint64(i+2) {
			t.Errorf("event %d has sequence %d", i, e.Sequence)
		}
	}
	if got[4].Text != "b" {
		t.Errorf("last text %q", got[4].Text)
	}
	// Filtered replay.
	only := collect(t, l.Watch(WatchOptions{Filter: func(e *Event) bool { return e.Text == "b" }}))
	if len(only) != 1 || only[0].Sequence != 6 {
		t.Errorf("filtered %v", only)
	}
}

func TestFollowDeliversLiveEventsAfterReplay(t *testing.T) {
	l, err := Open(filepath.Join(t.TempDir(), FileName), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	l.Append(ev("past"))
	w := l.Watch(WatchOptions{Follow: true})
	defer w.Close()
	done := make(chan []uint64)
	go func() {
		var seqs []uint64
		for len(seqs) < 3 {
			e, err := w.Next(context.Background())
			if err != nil {
				break
			}
			seqs = append(seqs, e.Sequence)
		}
		done <- seqs
	}()
	l.Append(ev("live1"))
	l.Append(ev("live2"))
	select {
	case seqs := <-done:
		if len(seqs) != 3 || seqs[0] != 1 || seqs[2] != 3 {
			t.Errorf("got %v", seqs)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("watcher did not receive live events")
	}
}

// A watcher that never reads must not hold up Append; it is cut off with an
// error naming where to resume, and resuming there loses nothing.
func TestSlowWatcherIsCutOffWithoutBlocking(t *testing.T) {
	l, err := Open(filepath.Join(t.TempDir(), FileName), Options{Buffer: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	slow := l.Watch(WatchOptions{Follow: true})
	fast := l.Watch(WatchOptions{Follow: true})
	appended := make(chan error, 1)
	go func() {
		for i := 0; i < 50; i++ {
			if _, err := l.Append(ev("x")); err != nil {
				appended <- err
				return
			}
		}
		appended <- nil
	}()
	// The fast watcher keeps up...
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	fastGot := 0
	var fastErr error
	for fastGot < 50 {
		if _, fastErr = fast.Next(ctx); fastErr != nil {
			break
		}
		fastGot++
	}
	// ...and Append finished although slow never read.
	if err := <-appended; err != nil {
		t.Fatal(err)
	}
	var slowErr *SlowWatcherError
	got := 0
	var lastSeq uint64
	for {
		e, err := slow.Next(ctx)
		if err != nil {
			if !errors.As(err, &slowErr) {
				t.Fatalf("slow watcher error %v, want *SlowWatcherError", err)
			}
			break
		}
		got++
		lastSeq = e.Sequence
	}
	if got != 4 || slowErr.Resume != lastSeq+1 {
		t.Errorf("slow watcher got %d events (last %d), resume %d", got, lastSeq, slowErr.Resume)
	}
	// Resume from the reported sequence: the rest arrives, in order.
	rest := collect(t, l.Watch(WatchOptions{From: slowErr.Resume}))
	if len(rest) != 50-got || rest[0].Sequence != slowErr.Resume {
		t.Errorf("resume got %d events starting at %d", len(rest), rest[0].Sequence)
	}
	if fastGot < 4 && fastErr == nil {
		t.Errorf("fast watcher got %d", fastGot)
	}
}
