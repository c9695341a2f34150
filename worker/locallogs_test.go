package worker_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/decreehq/decree/internal/testtool"
	decreev1 "github.com/decreehq/decree/proto/decree/v1"
	"github.com/decreehq/decree/worker"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
)

// memLogs is an in-process UploadLogs (as an embedded controller hands
// over in Options.Logs) keeping one log in memory.
type memLogs struct {
	mu    sync.Mutex
	log   bytes.Buffer
	calls int
}

func (m *memLogs) UploadLogs(ctx context.Context, _ ...grpc.CallOption) (grpc.ClientStreamingClient[decreev1.UploadLogsRequest, decreev1.UploadLogsResponse], error) {
	m.mu.Lock()
	m.calls++
	m.mu.Unlock()
	return &memUpload{m: m, ctx: ctx}, nil
}

type memUpload struct {
	grpc.ClientStream
	m   *memLogs
	ctx context.Context
}

func (u *memUpload) Send(req *decreev1.UploadLogsRequest) error {
	c := req.GetChunk()
	u.m.mu.Lock()
	defer u.m.mu.Unlock()
	if c.GetOffset() > uint64(u.m.log.Len()) {
		return io.EOF
	}
	if end := c.GetOffset() + uint64(len(c.GetData())); end > uint64(u.m.log.Len()) {
		u.m.log.Write(c.GetData()[uint64(u.m.log.Len())-c.GetOffset():])
	}
	return nil
}

func (u *memUpload) CloseAndRecv() (*decreev1.UploadLogsResponse, error) {
	u.m.mu.Lock()
	defer u.m.mu.Unlock()
	return &decreev1.UploadLogsResponse{StoredOffsets: map[string]uint64{"routine": uint64(u.m.log.Len())}}, nil
}

func (u *memUpload) Header() (metadata.MD, error) { return nil, nil }
func (u *memUpload) Trailer() metadata.MD         { return nil }
func (u *memUpload) CloseSend() error             { return nil }
func (u *memUpload) Context() context.Context     { return u.ctx }

// With Options.Logs set, the routine's log goes there, whole and in order,
// and not over the connection (which still carries everything else).
func TestLogsOptionCarriesTheLog(t *testing.T) {
	testtool.Require(t, "bash")
	ws := workspace(t, map[string]string{"talk": `for i in $(seq 1 2000); do echo "out $i"; echo "err $i" >&2; done`})
	fake := newFakeController()
	startServer(t, sockOf(ws), fake)
	fake.assign(routineAssignment("lease-1", "talk"))
	logs := &memLogs{}
	runWorker(t, worker.Options{Workspace: ws, Logs: logs})
	c := waitCompletion(t, fake, 30*time.Second)
	var want strings.Builder
	for i := 1; i <= 2000; i++ {
		want.WriteString(fmt.Sprintf("out %d\nerr %d\n", i, i))
	}
	logs.mu.Lock()
	defer logs.mu.Unlock()
	if logs.log.String() != want.String() {
		t.Fatalf("log through Options.Logs: %d bytes that differ from the routine's %d", logs.log.Len(), want.Len())
	}
	if c.GetStatus().GetExitCode() != 0 || c.GetLogSizes()["routine"] != uint64(want.Len()) {
		t.Fatalf("completion %v, want exit 0 and log size %d", c, want.Len())
	}
	fake.mu.Lock()
	defer fake.mu.Unlock()
	if fake.uploadCalls != 0 || logs.calls == 0 {
		t.Fatalf("UploadLogs calls: %d over the connection, %d through Options.Logs; want none and some", fake.uploadCalls, logs.calls)
	}
}
