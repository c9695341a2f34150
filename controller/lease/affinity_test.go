package lease

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/decreehq/decree/controller/logbook"
)

// pick returns the worker pickLocked would give req to now ("" for none).
func pick(m *Manager, req Requirements) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	if s := m.pickLocked(req, m.clock.Now()); s != nil {
		return s.req.GetWorkerId()
	}
	return ""
}

func TestLaneAffinity(t *testing.T) {
	dir := t.TempDir()
	book := logbook.New(func(k logbook.Key) (string, error) { return filepath.Join(dir, k.Stream), nil })
	m, err := New(Options{Logs: book, LeaseTTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	connect(t, m, "w1", nil)
	connect(t, m, "w2", nil)

	if got := pick(m, Requirements{Lane: "a"}); got == "" {
		t.Fatal("an unreserved lane found no worker")
	}
	m.Reserve("a", "w2")
	if got := pick(m, Requirements{Lane: "a"}); got != "w2" {
		t.Errorf("lane a reserved w2 but got %q", got)
	}
	if got := pick(m, Requirements{Lane: "b"}); got != "w1" {
		t.Errorf("lane b must avoid w2 (reserved by a), got %q", got)
	}
	if got := pick(m, Requirements{}); got != "w1" {
		t.Errorf("work of no lane must avoid w2, got %q", got)
	}
	m.Reserve("b", "w1")
	if got := pick(m, Requirements{}); got != "" {
		t.Errorf("every worker is reserved, yet work of no lane got %q", got)
	}
	if m.Reserved("a") != "w2" || m.Reserved("b") != "w1" {
		t.Errorf("Reserved: a=%q b=%q", m.Reserved("a"), m.Reserved("b"))
	}
	// Moving a's reservation frees w2.
	m.Reserve("a", "w1")
	if got := m.Reserved("b"); got != "" {
		t.Errorf("w1 taken by a, b still holds %q", got)
	}
	m.Unreserve("a")
	if got := pick(m, Requirements{}); got == "" {
		t.Error("after Unreserve, no worker takes work of no lane")
	}
}

func TestLaneFallsBackWhenItsWorkerIsGone(t *testing.T) {
	dir := t.TempDir()
	book := logbook.New(func(k logbook.Key) (string, error) { return filepath.Join(dir, k.Stream), nil })
	m, err := New(Options{Logs: book, LeaseTTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	connect(t, m, "w1", nil)
	m.Reserve("a", "gone") // a worker that is not connected
	if got := pick(m, Requirements{Lane: "a"}); got != "w1" {
		t.Errorf("lane a's worker is gone; want w1, got %q", got)
	}
}

func TestReplicaRequirement(t *testing.T) {
	s := &session{inPlace: true}
	if matches(s, Requirements{Replica: true}) {
		t.Error("an in-place worker matched work that needs a replica")
	}
	s.inPlace = false
	if !matches(s, Requirements{Replica: true}) {
		t.Error("a replica worker did not match work that needs a replica")
	}
}
