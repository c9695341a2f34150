package lease

import (
	"testing"

	decreev1 "github.com/decreehq/decree/proto/decree/v1"
)

// TestDrainHandsBackUnstartedWork: a draining worker keeps the lease it
// started, its unstarted one goes to another worker with the same token at
// once (not lost), and it gets no new work; Stats counts all of it.
func TestDrainHandsBackUnstartedWork(t *testing.T) {
	m, _ := newClockedManager(t, Options{})
	a := streamWorker(t, m, "a")
	first := dispatchAsync(m, "20261125120000-0", 1)
	got := a.next(t)
	if st := m.Stats(); st.Pending != 0 || st.Active != 1 || st.Workers["busy"] != 1 {
		t.Fatalf("stats with one lease given: %+v", st)
	}
	// a drains before starting it: the lease goes back to the queue.
	if err := m.Drain(a.session, nil); err != nil {
		t.Fatal(err)
	}
	if st := m.Stats(); st.Pending != 1 || st.Released != 1 || st.Workers["draining"] != 1 {
		t.Fatalf("stats after the hand-back: %+v, want 1 pending, 1 released, a draining", st)
	}
	second := dispatchAsync(m, "20261125120001-0", 1)
	b := streamWorker(t, m, "b")
	again := b.next(t)
	if again.GetLeaseToken() != got.GetLeaseToken() || again.GetMessageId() != "20261125120000-0" {
		t.Fatalf("b got %s/%s, want the handed-back lease first", again.GetMessageId(), again.GetLeaseToken())
	}
	select {
	case x := <-a.got:
		t.Fatalf("the draining worker got new work: %s", x.GetMessageId())
	default:
	}
	if _, err := m.Complete(&decreev1.CompleteAssignmentRequest{LeaseToken: again.GetLeaseToken(), Status: &decreev1.ExitStatus{}}); err != nil {
		t.Fatal(err)
	}
	if d := <-first; d.err != nil || d.res.Lost || d.res.WorkerID != "b" {
		t.Fatalf("handed-back work ended %+v, %v; want reported by b", d.res, d.err)
	}
	// The second message goes to b too (a drains), and a draining
	// heartbeat listing a started lease keeps it.
	next := b.next(t)
	if err := m.Drain(b.session, []string{next.GetLeaseToken()}); err != nil {
		t.Fatal(err)
	}
	if st := m.Stats(); st.Pending != 0 || st.Active != 1 {
		t.Fatalf("a started lease was handed back: %+v", st)
	}
	if _, err := m.Complete(&decreev1.CompleteAssignmentRequest{LeaseToken: next.GetLeaseToken(), Status: &decreev1.ExitStatus{}}); err != nil {
		t.Fatal(err)
	}
	if d := <-second; d.err != nil || d.res.WorkerID != "b" {
		t.Fatalf("second: %+v, %v", d.res, d.err)
	}
	if err := m.Drain("nope", nil); err == nil {
		t.Error("draining an unknown session succeeded")
	}
}
