package rpc

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/decreehq/decree/controller/lease"
	decreev1 "github.com/decreehq/decree/proto/decree/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/status"
)

// uploader is what a worker's log shipping calls: the generated client or
// a LocalLogs.
type uploader interface {
	UploadLogs(ctx context.Context, opts ...grpc.CallOption) (grpc.ClientStreamingClient[decreev1.UploadLogsRequest, decreev1.UploadLogsResponse], error)
}

// The in-process UploadLogs answers every call as the RPC over a real
// socket does: the same stored offsets, the same status codes and messages
// for a resend, a gap, a foreign chunk, an unknown lease and an ended one,
// and the same log on disk.
func TestLocalLogsAnswerAsTheRPC(t *testing.T) {
	type step struct {
		name   string
		token  string // "" is the lease's
		chunks []*decreev1.LogChunk
	}
	foreign := chunk(9, 16, "x")
	foreign.MessageId = "2025022514320000-1"
	steps := []step{
		{"two chunks", "", []*decreev1.LogChunk{chunk(0, 0, "hello "), chunk(1, 6, "world\n")}},
		{"resend overlapping", "", []*decreev1.LogChunk{chunk(1, 3, "lo world\n"), chunk(2, 6, "world\nmore")}},
		{"gap", "", []*decreev1.LogChunk{chunk(5, 100, "lost")}},
		{"chunk after a refused one", "", []*decreev1.LogChunk{chunk(3, 100, "lost"), chunk(3, 16, "not stored")}},
		{"foreign message", "", []*decreev1.LogChunk{foreign}},
		{"no chunk", "", []*decreev1.LogChunk{nil}},
		{"unknown lease", "no-such-lease", []*decreev1.LogChunk{chunk(3, 16, "x")}},
		{"empty call", "", nil},
		{"ended lease", "", []*decreev1.LogChunk{chunk(3, 16, " after the end")}},
	}
	run := func(t *testing.T, local bool) (answers []string, log string) {
		e := newEnv(t, 2*time.Second)
		var c uploader = e.client
		if local {
			c = NewLocalLogs(e.m, nil)
		}
		w := e.worker(t, "local", e.st.InstanceID(), "shell")
		results := dispatch(context.Background(), e.m, &lease.Work{Kind: lease.WorkRoutine, MessageID: msgID, Attempt: 1, MaxAttempts: 3},
			lease.Requirements{Driver: "shell", InPlace: true})
		a := w.next(5 * time.Second)
		if a == nil {
			t.Fatal("no assignment")
		}
		for _, s := range steps {
			if s.name == "ended lease" {
				if _, err := e.client.CompleteAssignment(context.Background(), &decreev1.CompleteAssignmentRequest{LeaseToken: a.GetLeaseToken(),
					Status: &decreev1.ExitStatus{ExitCode: 1}, LogSizes: map[string]uint64{"routine": 16}}); err != nil {
					t.Fatal(err)
				}
				<-results
				// Accepted: late chunks of a reported attempt are
				// still stored; a lease that was never reported is
				// refused, checked with the unknown lease above.
			}
			tok := s.token
			if tok == "" {
				tok = a.GetLeaseToken()
			}
			resp, err := upload(context.Background(), c, tok, s.chunks...)
			answers = append(answers, fmt.Sprintf("%s: offsets %v, code %s, %q", s.name, resp.GetStoredOffsets(), status.Code(err), status.Convert(err).Message()))
		}
		b, err := os.ReadFile(filepath.Join(e.st.Dir(), "runs", msgID, "routine.log"))
		if err != nil {
			t.Fatal(err)
		}
		return answers, string(b)
	}
	overSocket, socketLog := run(t, false)
	inProcess, localLog := run(t, true)
	for i := range steps {
		if overSocket[i] != inProcess[i] {
			t.Errorf("step %d\n over the socket: %s\n in process:      %s", i+1, overSocket[i], inProcess[i])
		}
	}
	if want := "hello world\nmore after the end"; socketLog != want || localLog != want {
		t.Errorf("routine.log over the socket %q, in process %q; want %q", socketLog, localLog, want)
	}
	if t.Failed() || testing.Verbose() {
		for _, a := range overSocket {
			t.Log("socket: ", a)
		}
	}
}

// A cancelled caller's call ends as a gRPC call does: with CANCELED,
// storing nothing.
func TestLocalLogsCancelled(t *testing.T) {
	e := newEnv(t, 2*time.Second)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := NewLocalLogs(e.m, nil).UploadLogs(ctx); status.Code(err).String() != "Canceled" {
		t.Fatalf("UploadLogs with a cancelled context: %v, want CANCELED", err)
	}
}
