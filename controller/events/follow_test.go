package events

import (
	"context"
	"path/filepath"
	"testing"
	"time"
)

// TestFollowResumesAfterFallingBehind: a follower slower than its buffer
// is cut off and resumes from the file, so it still sees every event once,
// in order.
func TestFollowResumesAfterFallingBehind(t *testing.T) {
	l, err := Open(filepath.Join(t.TempDir(), "events.jsonl"), Options{Buffer: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if _, err := l.Append(&Event{Kind: Warning, Text: "before"}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	release := make(chan struct{})
	seen := make(chan uint64, 100)
	done := make(chan struct{})
	go func() {
		defer close(done)
		l.followFrom(ctx, 2, func(e *Event) {
			<-release
			seen <- e.Sequence
		})
	}()
	// The follower starts after "before" (sequence 1), whenever it runs.
	const n = 20
	for i := 0; i < n; i++ {
		if _, err := l.Append(&Event{Kind: Warning}); err != nil {
			t.Fatal(err)
		}
	}
	close(release)
	var got []uint64
	deadline := time.After(10 * time.Second)
	for len(got) < n {
		select {
		case s := <-seen:
			got = append(got, s)
		case <-deadline:
			t.Fatalf("saw %v, want sequences 2..%d", got, n+1)
		}
	}
	for i, s := range got {
		if s != uint64(i+2) {
			t.Fatalf("saw %v, want sequences 2..%d in order", got, n+1)
		}
	}
	cancel()
	<-done
}
