package lease

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// crashAndRestart gives worker "old" a lease under a first manager, then
// starts a second manager on the same journal as if the first had been
// killed; it returns the second manager, its clock and the old token.
func crashAndRestart(t *testing.T, margin time.Duration) (*Manager, *manualClock, string) {
	t.Helper()
	journal := filepath.Join(t.TempDir(), "leases.json")
	first, _ := newClockedManager(t, Options{Journal: journal, FenceMargin: margin})
	w := streamWorker(t, first, "old")
	dispatchAsync(first, "m1", 1)
	token := w.next(t).GetLeaseToken()
	m, clock := newClockedManager(t, Options{Journal: journal, FenceMargin: margin})
	return m, clock, token
}

// After a crash, the new controller gives out no work while a worker of
// the old one may still run an attempt; once that worker reports it runs
// nothing of the old controller's, work flows again.
func TestRestartWaitsForWorkersToReportOldWork(t *testing.T) {
	m, _, token := crashAndRestart(t, time.Second)
	fresh := streamWorker(t, m, "fresh")
	if _, err := m.Heartbeat(fresh.session, nil); err != nil {
		t.Fatal(err)
	}
	res := dispatchAsync(m, "m1", 2)
	old := streamWorker(t, m, "old")
	if stop, _ := m.Heartbeat(old.session, []string{token}); len(stop) != 1 || stop[0] != token {
		t.Fatalf("old work not told to stop: %v", stop)
	}
	for _, w := range []*testWorker{fresh, old} {
		select {
		case a := <-w.got:
			t.Fatalf("work %v given while the old worker still runs the old attempt", a)
		case <-time.After(50 * time.Millisecond):
		}
	}
	if _, err := m.Heartbeat(old.session, nil); err != nil { // the old attempt is gone
		t.Fatal(err)
	}
	select {
	case <-fresh.got:
	case <-old.got:
	case <-time.After(10 * time.Second):
		t.Fatal("no work given after the old worker reported")
	}
	assertPending(t, res, "assigned, not finished")
}

// A worker of the old controller that never comes back holds work back
// for the lease TTL plus the fence margin, no longer.
func TestRestartHoldEndsAfterTTLAndMargin(t *testing.T) {
	const margin = time.Second
	m, clock, _ := crashAndRestart(t, margin)
	fresh := streamWorker(t, m, "fresh")
	dispatchAsync(m, "m1", 2)
	clock.Advance(testTTL + margin - time.Millisecond)
	if _, err := m.Heartbeat(fresh.session, nil); err != nil {
		t.Fatal(err)
	}
	select {
	case a := <-fresh.got:
		t.Fatalf("work %v given before the old lease certainly ended", a)
	case <-time.After(50 * time.Millisecond):
	}
	clock.Advance(time.Millisecond)
	fresh.next(t)
}

// A controller that shut down with no lease active leaves an empty
// journal: the next one starts giving work at once.
func TestCleanJournalHoldsNothing(t *testing.T) {
	journal := filepath.Join(t.TempDir(), "leases.json")
	first, clock := newClockedManager(t, Options{Journal: journal})
	w := streamWorker(t, first, "w")
	res := dispatchAsync(first, "m1", 1)
	a := w.next(t)
	clock.Advance(time.Second)
	if _, err := first.Heartbeat(w.session, []string{a.GetLeaseToken()}); err != nil {
		t.Fatal(err)
	}
	if resp, err := first.Complete(completion(a.GetLeaseToken())); err != nil || !resp.GetAccepted() {
		t.Fatalf("complete: %v %v", resp, err)
	}
	waitResult(t, res)
	if b, _ := os.ReadFile(journal); string(b) != "{\"leases\":[]}\n" {
		t.Fatalf("journal after the lease ended: %q", b)
	}
	m, _ := newClockedManager(t, Options{Journal: journal})
	w2 := streamWorker(t, m, "w")
	dispatchAsync(m, "m2", 1)
	w2.next(t)
}

// WaitFenced returns only once the previous controller's leases are
// accounted for (here: their TTL and margin passed), and at once when
// there were none.
func TestWaitFenced(t *testing.T) {
	const margin = time.Second
	m, clock, _ := crashAndRestart(t, margin)
	done := make(chan error, 1)
	go func() { done <- m.WaitFenced(context.Background()) }()
	clock.Advance(testTTL + margin - time.Millisecond)
	select {
	case err := <-done:
		t.Fatalf("WaitFenced returned (%v) before the old lease certainly ended", err)
	case <-time.After(50 * time.Millisecond):
	}
	clock.Advance(time.Millisecond)
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("WaitFenced still waits after the hold ended")
	}
	clean, _ := newClockedManager(t, Options{Journal: filepath.Join(t.TempDir(), "leases.json")})
	if err := clean.WaitFenced(context.Background()); err != nil {
		t.Fatal(err)
	}
}
