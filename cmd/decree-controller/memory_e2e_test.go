package main

import (
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/decreehq/decree/internal/testtool"
	decreev1 "github.com/decreehq/decree/proto/decree/v1"
)

// TestUnauthenticatedBodiesCostNoMemory sends 4 concurrent 60 MB
// SubmitMessage calls without a token to a decree-controller process: each
// must be refused as Unauthenticated, and the controller's peak resident
// memory (VmHWM) must grow by no more than a few megabytes, because the
// token is checked on the stream's headers before the body is read.
func TestUnauthenticatedBodiesCostNoMemory(t *testing.T) {
	e := newEnv(t)
	addr, proc := e.startController(e.project, "--listen", "127.0.0.1:0", "--insecure",
		"--client-token-file", e.clientTF, "--worker-token-file", e.workerTF)
	pid := proc.Cmd.Process.Pid

	const body = 60 << 20
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallSendMsgSize(body+(1<<20))))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	client := decreev1.NewControllerServiceClient(conn)
	ctx := timeout(t, 2*time.Minute)
	// One small call first, so the connection and the server's handlers
	// exist before the baseline is taken.
	if _, err := client.GetStatus(ctx, &decreev1.GetStatusRequest{}); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("GetStatus without a token: %v, want Unauthenticated", err)
	}
	before := testtool.ProcStatusKiB(t, pid, "VmHWM")

	req := &decreev1.SubmitMessageRequest{Name: "flood", Body: make([]byte, body)}
	var wg sync.WaitGroup
	errs := make([]error, 4) // (the issue saw 16 take 1.2-1.6 GB; 4 keep the test light)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = client.SubmitMessage(ctx, req)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if status.Code(err) != codes.Unauthenticated {
			t.Errorf("call %d: %v, want Unauthenticated", i, err)
		}
	}
	after := testtool.ProcStatusKiB(t, pid, "VmHWM")
	t.Logf("controller VmHWM %d KiB before, %d KiB after 4 unauthenticated 60 MB calls (+%d KiB)", before, after, after-before)
	if grown := after - before; grown > 8<<10 {
		t.Errorf("the controller's peak RSS grew by %d KiB (from %d KiB) for refused calls; want at most 8 MiB", grown, before)
	}
}
