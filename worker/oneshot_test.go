package worker_test

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/decreehq/decree/internal/testtool"
	"github.com/decreehq/decree/worker"
)

// TestExitAfter: a worker with ExitAfter 1 runs and reports its first
// assignment, never starts the second one it was sent, says it drains in a
// heartbeat that lists only the started lease, and Run returns nil.
func TestExitAfter(t *testing.T) {
	ws := workspace(t, map[string]string{"ok": "#!/usr/bin/env bash\necho ran >> ran.txt\n"})
	fake := newFakeController()
	startServer(t, sockOf(ws), fake)
	first, second := routineAssignment("lease-1", "ok"), routineAssignment("lease-2", "ok")
	fake.assign(first)
	fake.assign(second)
	w := runWorker(t, worker.Options{Workspace: ws, WorkerID: "oneshot", ExitAfter: 1})
	returnsByItself(t, w, "a worker with ExitAfter 1")
	if c := waitCompletion(t, fake, time.Second); c.GetLeaseToken() != "lease-1" {
		t.Fatalf("reported %s, want lease-1", c.GetLeaseToken())
	}
	select {
	case c := <-fake.completed:
		t.Fatalf("the second assignment was run too: %s", c.GetLeaseToken())
	default:
	}
	fake.mu.Lock()
	defer fake.mu.Unlock()
	drained := false
	for _, hb := range fake.heartbeats {
		if hb.GetDraining() {
			drained = true
			if slices.Contains(hb.GetLeaseTokens(), "lease-2") {
				t.Errorf("a draining heartbeat lists the unstarted lease-2: %v", hb.GetLeaseTokens())
			}
		}
	}
	if !drained {
		t.Error("no heartbeat said the worker drains")
	}
}

// TestExitWhenIdle: with nothing to do, Run returns nil after the idle
// time, and the last heartbeat says the worker drains.
func TestExitWhenIdle(t *testing.T) {
	ws := workspace(t, nil)
	fake := newFakeController()
	startServer(t, sockOf(ws), fake)
	start := time.Now()
	w := runWorker(t, worker.Options{Workspace: ws, WorkerID: "idle", ExitWhenIdle: 300 * time.Millisecond})
	returnsByItself(t, w, "an idle worker")
	if d := time.Since(start); d < 300*time.Millisecond {
		t.Errorf("exited after %s, before the idle time", d)
	}
	fake.mu.Lock()
	defer fake.mu.Unlock()
	if n := len(fake.heartbeats); n == 0 || !fake.heartbeats[n-1].GetDraining() {
		t.Errorf("the last heartbeat does not say the worker drains (%d heartbeats)", n)
	}
}

// TestStopDrains: a worker stopped (SIGTERM: its context ends) while it
// holds an assignment it has not started says so in a draining heartbeat
// that does not list it, so the controller gives it to another worker.
func TestStopDrains(t *testing.T) {
	ws := workspace(t, map[string]string{"slow": "#!/usr/bin/env bash\nsleep 30\n"})
	fake := newFakeController()
	startServer(t, sockOf(ws), fake)
	w := runWorker(t, worker.Options{Workspace: ws, WorkerID: "stopped"})
	fake.assign(routineAssignment("lease-run", "slow"))
	fake.assign(routineAssignment("lease-queued", "slow"))
	testtool.WaitFor(t, 20*time.Second, "the worker to hold both leases", func() bool {
		fake.mu.Lock()
		defer fake.mu.Unlock()
		for _, hb := range fake.heartbeats {
			if slices.Contains(hb.GetLeaseTokens(), "lease-queued") {
				return true
			}
		}
		return false
	})
	w.cancel()
	if err := <-w.done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	w.done <- nil
	if c := waitCompletion(t, fake, 5*time.Second); c.GetLeaseToken() != "lease-run" {
		t.Fatalf("reported %s, want the running lease-run (stopped)", c.GetLeaseToken())
	}
	fake.mu.Lock()
	defer fake.mu.Unlock()
	last := fake.heartbeats[len(fake.heartbeats)-1]
	if !last.GetDraining() || slices.Contains(last.GetLeaseTokens(), "lease-queued") {
		t.Errorf("last heartbeat: draining %v, leases %v; want draining without lease-queued", last.GetDraining(), last.GetLeaseTokens())
	}
}

// returnsByItself waits for Run to return nil without being cancelled.
func returnsByItself(t *testing.T, w *running, what string) {
	t.Helper()
	select {
	case err := <-w.done:
		w.done <- err // for the cleanup
		if err != nil {
			t.Fatalf("%s: Run = %v, want nil", what, err)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("%s did not exit by itself", what)
	}
}

// TestUnreportedWorkIsNotHandedBack: work that ran but whose report never
// got through is still listed by the draining heartbeat of a stopping
// worker, so the controller lets it end as lost instead of giving it to
// another worker as if it had never run.
func TestUnreportedWorkIsNotHandedBack(t *testing.T) {
	ws := workspace(t, map[string]string{"ok": "#!/usr/bin/env bash\necho ran > ran.txt\n"})
	fake := newFakeController()
	fake.failCompletes = true
	startServer(t, sockOf(ws), fake)
	w := runWorker(t, worker.Options{Workspace: ws, WorkerID: "cut-off", ShutdownTimeout: 300 * time.Millisecond})
	fake.assign(routineAssignment("lease-ran", "ok"))
	testtool.WaitFor(t, 20*time.Second, "the routine to run", func() bool {
		_, err := os.Stat(filepath.Join(ws, "ran.txt"))
		return err == nil
	})
	w.cancel()
	if err := <-w.done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	w.done <- nil
	fake.mu.Lock()
	defer fake.mu.Unlock()
	last := fake.heartbeats[len(fake.heartbeats)-1]
	if !last.GetDraining() || !slices.Contains(last.GetLeaseTokens(), "lease-ran") {
		t.Errorf("last heartbeat: draining %v, leases %v; want draining, still listing lease-ran", last.GetDraining(), last.GetLeaseTokens())
	}
}
