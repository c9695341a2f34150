package lease

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/decreehq/decree/controller/logbook"
	decreev1 "github.com/decreehq/decree/proto/decree/v1"
)

const testTTL = 10 * time.Second

// testWorker is a registered session whose assignments arrive on got.
type testWorker struct {
	session string
	got     chan *decreev1.Assignment
}

func newClockedManager(t *testing.T, opts Options) (*Manager, *manualClock) {
	t.Helper()
	dir := t.TempDir()
	clock := newManualClock()
	opts.Logs = logbook.New(func(k logbook.Key) (string, error) { return filepath.Join(dir, k.Stream), nil })
	opts.Clock = clock
	if opts.LeaseTTL == 0 {
		opts.LeaseTTL = testTTL
	}
	m, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	return m, clock
}

func streamWorker(t *testing.T, m *Manager, id string) *testWorker {
	t.Helper()
	resp, err := m.Register(&decreev1.RegisterWorkerRequest{WorkerId: id})
	if err != nil {
		t.Fatal(err)
	}
	w := &testWorker{session: resp.GetSessionId(), got: make(chan *decreev1.Assignment, 8)}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = m.Stream(ctx, w.session, func(a *decreev1.Assignment) error { w.got <- a; return nil })
	}()
	t.Cleanup(func() { cancel(); <-done })
	return w
}

func (w *testWorker) next(t *testing.T) *decreev1.Assignment {
	t.Helper()
	select {
	case a := <-w.got:
		return a
	case <-time.After(10 * time.Second):
		t.Fatal("no assignment arrived")
		return nil
	}
}

type dispatched struct {
	res Result
	err error
}

func dispatchAsync(m *Manager, id string, attempt int) <-chan dispatched {
	out := make(chan dispatched, 1)
	go func() {
		res, err := m.Dispatch(context.Background(), &Work{Kind: WorkRoutine, MessageID: id, Attempt: attempt}, Requirements{})
		out <- dispatched{res, err}
	}()
	return out
}

func assertPending(t *testing.T, ch <-chan dispatched, what string) {
	t.Helper()
	select {
	case r := <-ch:
		t.Fatalf("%s: dispatch ended early: %+v %v", what, r.res, r.err)
	case <-time.After(20 * time.Millisecond):
	}
}

func waitResult(t *testing.T, ch <-chan dispatched) dispatched {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(10 * time.Second):
		t.Fatal("dispatch did not end")
		return dispatched{}
	}
}

// Renewals keep a lease alive for many TTLs; once they stop, the lease
// expires one TTL after the last renewal (reports are refused from then
// on), and its loss is reported only after the fence margin, by which time
// the worker's supervisor has killed the attempt. The clock is manual, so
// nothing here sleeps for a TTL.
func TestLeaseLivesWhileRenewedAndIsLostAfterTTLAndFence(t *testing.T) {
	const margin = 3 * time.Second
	m, clock := newClockedManager(t, Options{FenceMargin: margin})
	w := streamWorker(t, m, "w1")
	res := dispatchAsync(m, "m1", 1)
	a := w.next(t)
	for range 5 { // five renewals, each before the TTL runs out: 2.5 TTLs
		clock.Advance(testTTL / 2)
		if stop, err := m.Heartbeat(w.session, []string{a.GetLeaseToken()}); err != nil || len(stop) != 0 {
			t.Fatalf("heartbeat: stop %v, err %v", stop, err)
		}
	}
	assertPending(t, res, "renewed lease")
	clock.Advance(testTTL - time.Millisecond)
	assertPending(t, res, "just before the TTL")
	clock.Advance(time.Millisecond)
	assertPending(t, res, "expired, within the fence margin")
	if resp, _ := m.Complete(&decreev1.CompleteAssignmentRequest{LeaseToken: a.GetLeaseToken(), Status: &decreev1.ExitStatus{}}); resp.GetAccepted() {
		t.Error("a report after the expiry was accepted")
	}
	if stop, _ := m.Heartbeat(w.session, []string{a.GetLeaseToken()}); len(stop) != 1 {
		t.Errorf("an expired lease was renewed: stop = %v", stop)
	}
	clock.Advance(margin - time.Millisecond)
	assertPending(t, res, "just before the end of the fence margin")
	clock.Advance(time.Millisecond)
	r := waitResult(t, res)
	if r.err != nil || !r.res.Lost || !strings.Contains(r.res.Status.GetError(), "worker lost") {
		t.Fatalf("result %+v, %v; want a lost lease", r.res, r.err)
	}
}

// The worker is given no new work while its lost lease is being fenced.
func TestNoNewWorkWhileFencing(t *testing.T) {
	m, clock := newClockedManager(t, Options{FenceMargin: time.Second})
	w := streamWorker(t, m, "w1")
	first := dispatchAsync(m, "m1", 1)
	w.next(t)
	clock.Advance(testTTL)
	if _, err := m.Heartbeat(w.session, nil); err != nil { // the worker itself lives
		t.Fatal(err)
	}
	second := dispatchAsync(m, "m2", 1)
	select {
	case a := <-w.got:
		t.Fatalf("new work %s given during the fence margin", a.GetMessageId())
	case <-time.After(50 * time.Millisecond):
	}
	clock.Advance(time.Second)
	if r := waitResult(t, first); !r.res.Lost {
		t.Fatalf("first: %+v", r.res)
	}
	if a := w.next(t); a.GetMessageId() != "m2" {
		t.Fatalf("next assignment %v", a)
	}
	_ = second
}

func completion(token string) *decreev1.CompleteAssignmentRequest {
	return &decreev1.CompleteAssignmentRequest{LeaseToken: token, Status: &decreev1.ExitStatus{}}
}
