package worker_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/decreehq/decree/internal/testtool"
	decreev1 "github.com/decreehq/decree/proto/decree/v1"
	"github.com/decreehq/decree/worker"
	"github.com/decreehq/decree/worker/logship/logshiptest"
)

// With Options.Logs set, the routine's log goes there, whole and in order,
// and not over the connection (which still carries everything else).
func TestLogsOptionCarriesTheLog(t *testing.T) {
	testtool.Require(t, "bash")
	ws := workspace(t, map[string]string{"talk": `for i in $(seq 1 2000); do echo "out $i"; echo "err $i" >&2; done`})
	fake := newFakeController()
	startServer(t, sockOf(ws), fake)
	fake.assign(routineAssignment("lease-1", "talk"))
	logs := &logshiptest.Store{}
	runWorker(t, worker.Options{Workspace: ws, Logs: logs})
	c := waitCompletion(t, fake, 30*time.Second)
	var want strings.Builder
	for i := 1; i <= 2000; i++ {
		want.WriteString(fmt.Sprintf("out %d\nerr %d\n", i, i))
	}
	if got := logs.Log(); string(got) != want.String() {
		t.Fatalf("log through Options.Logs: %d bytes that differ from the routine's %d", len(got), want.Len())
	}
	if c.GetStatus().GetExitCode() != 0 || c.GetLogSizes()["routine"] != uint64(want.Len()) {
		t.Fatalf("completion %v, want exit 0 and log size %d", c, want.Len())
	}
	fake.mu.Lock()
	defer fake.mu.Unlock()
	if fake.uploadCalls != 0 || logs.Calls() == 0 {
		t.Fatalf("UploadLogs calls: %d over the connection, %d through Options.Logs; want none and some", fake.uploadCalls, logs.Calls())
	}
}

// A controller in the process refusing the log (the lease ended) stops the
// routine at once, and the report says why, as over the connection.
func TestLogsOptionRefusalStopsRoutine(t *testing.T) {
	testtool.Require(t, "bash")
	ws := workspace(t, map[string]string{"chatty": `while true; do echo tick; sleep 0.01; done`})
	fake := newFakeController()
	startServer(t, sockOf(ws), fake)
	fake.assign(routineAssignment("lease-1", "chatty"))
	logs := &logshiptest.Store{Refuse: func(c *decreev1.LogChunk) error {
		if c.GetOffset() >= 50 {
			return status.Error(codes.FailedPrecondition, "lease ended: the controller shut down")
		}
		return nil
	}}
	runWorker(t, worker.Options{Workspace: ws, Logs: logs, Executor: worker.NewDefaultExecutor(worker.ExecOptions{Grace: 5 * time.Second})})
	c := waitCompletion(t, fake, 20*time.Second)
	if !strings.Contains(c.GetStatus().GetError(), "refused the log") || !strings.Contains(c.GetStatus().GetError(), "lease ended") {
		t.Fatalf("status = %v, want it stopped because the log was refused", c.GetStatus())
	}
	if got := len(logs.Log()); got < 50 || got > 50+64<<10 {
		t.Errorf("%d bytes stored, want those before the refusal", got)
	}
}
