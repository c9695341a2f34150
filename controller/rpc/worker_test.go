package rpc

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/decreehq/decree/controller/lease"
	"github.com/decreehq/decree/controller/logbook"
	"github.com/decreehq/decree/controller/store"
	decreev1 "github.com/decreehq/decree/proto/decree/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

const msgID = "2025022514320000-0"

type env struct {
	st     *store.Store
	m      *lease.Manager
	client decreev1.WorkerServiceClient
}

// newEnv serves the WorkerService on a unix socket in a temporary directory
// and dials it.
func newEnv(t *testing.T, ttl time.Duration) *env {
	t.Helper()
	dir := t.TempDir()
	st, _, m := newDomain(t, dir, ttl)
	conn := serveUnix(t, func(srv *grpc.Server) {
		decreev1.RegisterWorkerServiceServer(srv, NewWorkerServer(m))
	})
	t.Cleanup(func() { m.Close() })
	return &env{st: st, m: m, client: decreev1.NewWorkerServiceClient(conn)}
}

// newDomain opens a project store in dir with a logbook storing logs in
// its run directories and a lease manager over them.
func newDomain(t *testing.T, dir string, ttl time.Duration) (*store.Store, *logbook.Book, *lease.Manager) {
	t.Helper()
	st, err := store.Open(filepath.Join(dir, "project"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	book := logbook.New(func(k logbook.Key) (string, error) {
		p, err := st.LogPath(k.MessageID, k.Attempt, k.Stream)
		if err != nil {
			return "", err
		}
		return p, os.MkdirAll(filepath.Dir(p), 0o755)
	})
	m, err := lease.New(lease.Options{InstanceID: st.InstanceID(), LeaseTTL: ttl, Logs: book})
	if err != nil {
		t.Fatal(err)
	}
	return st, book, m
}

// fakeWorker is a test double of a worker built on the generated client.
type fakeWorker struct {
	t       *testing.T
	c       decreev1.WorkerServiceClient
	session string
	inPlace bool
	got     chan *decreev1.Assignment
	cancel  context.CancelFunc
}

func (e *env) worker(t *testing.T, id, instance string, drivers ...string) *fakeWorker {
	t.Helper()
	req := &decreev1.RegisterWorkerRequest{WorkerId: id, WorkspaceInstanceId: instance, Hostname: "test", Labels: map[string]string{"os": "linux"}}
	for _, d := range drivers {
		req.Drivers = append(req.Drivers, &decreev1.DriverInfo{Name: d})
	}
	resp, err := e.client.RegisterWorker(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	w := &fakeWorker{t: t, c: e.client, session: resp.GetSessionId(), inPlace: resp.GetInPlace(), got: make(chan *decreev1.Assignment, 4), cancel: cancel}
	stream, err := e.client.StreamAssignments(ctx, &decreev1.StreamAssignmentsRequest{SessionId: w.session})
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for {
			r, err := stream.Recv()
			if err != nil {
				return
			}
			w.got <- r.GetAssignment()
		}
	}()
	t.Cleanup(cancel)
	return w
}

func (w *fakeWorker) next(timeout time.Duration) *decreev1.Assignment {
	select {
	case a := <-w.got:
		return a
	case <-time.After(timeout):
		return nil
	}
}

// heartbeat renews tokens every interval until stopped; stop_leases answers
// are sent to stops.
func (w *fakeWorker) heartbeat(interval time.Duration, tokens []string, stops chan<- string) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for {
			resp, err := w.c.Heartbeat(ctx, &decreev1.HeartbeatRequest{SessionId: w.session, LeaseTokens: tokens})
			if err == nil && stops != nil {
				for _, s := range resp.GetStopLeases() {
					select {
					case stops <- s:
					default:
					}
				}
			}
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	return func() { cancel(); <-done }
}

type dispatchResult struct {
	res lease.Result
	err error
}

func dispatch(ctx context.Context, m *lease.Manager, a *lease.Work, req lease.Requirements) chan dispatchResult {
	ch := make(chan dispatchResult, 1)
	go func() {
		res, err := m.Dispatch(ctx, a, req)
		ch <- dispatchResult{res, err}
	}()
	return ch
}

func upload(ctx context.Context, c uploader, token string, chunks ...*decreev1.LogChunk) (*decreev1.UploadLogsResponse, error) {
	s, err := c.UploadLogs(ctx)
	if err != nil {
		return nil, err
	}
	for _, ch := range chunks {
		if err := s.Send(&decreev1.UploadLogsRequest{LeaseToken: token, Chunk: ch}); err != nil {
			break // the server ended the call; CloseAndRecv has its status
		}
	}
	return s.CloseAndRecv()
}

func chunk(seq, off uint64, data string) *decreev1.LogChunk {
	return &decreev1.LogChunk{MessageId: msgID, Attempt: 1, Stream: "routine", Sequence: seq, Offset: off, Data: []byte(data)}
}

func TestWorkerRoundTrip(t *testing.T) {
	e := newEnv(t, 2*time.Second)
	ctx := context.Background()
	// A worker without the shell driver and one elsewhere must not get it.
	other := e.worker(t, "notebook-only", e.st.InstanceID(), "notebook")
	remote := e.worker(t, "remote", "another-instance", "shell")
	w := e.worker(t, "local", e.st.InstanceID(), "shell")
	if !w.inPlace || remote.inPlace {
		t.Fatalf("in_place: local %v remote %v", w.inPlace, remote.inPlace)
	}

	results := dispatch(ctx, e.m, &lease.Work{Kind: lease.WorkRoutine, MessageID: msgID, Attempt: 1, MaxAttempts: 3},
		lease.Requirements{Driver: "shell", InPlace: true, Labels: map[string]string{"os": "linux"}})
	a := w.next(5 * time.Second)
	if a == nil {
		t.Fatal("the eligible worker got no assignment")
	}
	if a.GetMessageId() != msgID || a.GetLeaseToken() == "" {
		t.Fatalf("assignment %v", a)
	}
	if x := other.next(50 * time.Millisecond); x != nil {
		t.Fatalf("worker without the driver got %v", x)
	}
	if x := remote.next(10 * time.Millisecond); x != nil {
		t.Fatalf("worker elsewhere got %v", x)
	}
	stopHB := w.heartbeat(100*time.Millisecond, []string{a.GetLeaseToken()}, nil)
	defer stopHB()

	// A live follower sees every byte once, in order, and ends with the attempt.
	var followed strings.Builder
	var fmu sync.Mutex
	followDone := make(chan error, 1)
	go func() {
		followDone <- e.m.Follow(ctx, msgID, 1, "routine", 0, func(_ uint64, d []byte) error {
			fmu.Lock()
			followed.Write(d)
			fmu.Unlock()
			return nil
		})
	}()

	resp, err := upload(ctx, e.client, a.GetLeaseToken(), chunk(0, 0, "hello "), chunk(1, 6, "world\n"))
	if err != nil || resp.GetStoredOffsets()["routine"] != 12 {
		t.Fatalf("upload: %v %v", resp, err)
	}
	// A reconnecting worker resends from an earlier offset: overlap skipped.
	resp, err = upload(ctx, e.client, a.GetLeaseToken(), chunk(1, 3, "lo world\n"), chunk(2, 6, "world\nmore"))
	if err != nil || resp.GetStoredOffsets()["routine"] != 16 {
		t.Fatalf("resend: %v %v", resp, err)
	}
	// A gap is refused with OUT_OF_RANGE naming the offset to resend from.
	_, err = upload(ctx, e.client, a.GetLeaseToken(), chunk(5, 100, "lost"))
	if status.Code(err) != codes.OutOfRange || !strings.Contains(err.Error(), "resend from offset 16") {
		t.Fatalf("gap: %v", err)
	}
	// A chunk for another message under this lease is refused.
	bad := chunk(3, 16, "x")
	bad.MessageId = "2025022514320000-1"
	if _, err := upload(ctx, e.client, a.GetLeaseToken(), bad); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("foreign chunk: %v", err)
	}

	done := &decreev1.CompleteAssignmentRequest{LeaseToken: a.GetLeaseToken(), Status: &decreev1.ExitStatus{ExitCode: 0}, LogSizes: map[string]uint64{"routine": 16}}
	first, err := e.client.CompleteAssignment(ctx, done)
	if err != nil || !first.GetAccepted() || first.GetNote() != "" {
		t.Fatalf("complete: %v %v", first, err)
	}
	again, err := e.client.CompleteAssignment(ctx, done)
	if err != nil || !again.GetAccepted() || again.GetNote() != "duplicate" {
		t.Fatalf("repeat: %v %v", again, err)
	}
	r := <-results
	if r.err != nil || r.res.Lost || r.res.Status.GetExitCode() != 0 || r.res.WorkerID != "local" || len(r.res.LogsIncomplete) != 0 {
		t.Fatalf("dispatch: %+v %v", r.res, r.err)
	}
	log, err := os.ReadFile(filepath.Join(e.st.Dir(), "runs", msgID, "routine.log"))
	if err != nil || string(log) != "hello world\nmore" {
		t.Fatalf("routine.log = %q, %v", log, err)
	}
	select {
	case err := <-followDone:
		fmu.Lock()
		defer fmu.Unlock()
		if err != nil || followed.String() != "hello world\nmore" {
			t.Fatalf("follower: %q, %v", followed.String(), err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("follower did not end with the attempt")
	}
	// The worker is free again and takes the next assignment.
	results = dispatch(ctx, e.m, &lease.Work{Kind: lease.WorkRoutine, MessageID: msgID, Attempt: 2}, lease.Requirements{Driver: "shell", InPlace: true})
	if a2 := w.next(5 * time.Second); a2 == nil || a2.GetAttempt() != 2 {
		t.Fatalf("second assignment: %v", a2)
	} else {
		e.client.CompleteAssignment(ctx, &decreev1.CompleteAssignmentRequest{LeaseToken: a2.GetLeaseToken(), Status: &decreev1.ExitStatus{ExitCode: 3}, LogSizes: map[string]uint64{"routine": 5}})
	}
	if r := <-results; r.res.Status.GetExitCode() != 3 || len(r.res.LogsIncomplete) != 1 {
		t.Fatalf("second result: %+v", r.res)
	}
}

func TestWorkerLostWhenHeartbeatsStop(t *testing.T) {
	const ttl = 400 * time.Millisecond
	e := newEnv(t, ttl)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	w := e.worker(t, "flaky", e.st.InstanceID(), "shell")
	start := time.Now()
	results := dispatch(ctx, e.m, &lease.Work{Kind: lease.WorkRoutine, MessageID: msgID, Attempt: 1}, lease.Requirements{})
	a := w.next(5 * time.Second)
	if a == nil {
		t.Fatal("no assignment")
	}
	// Heartbeat for a while (the lease outlives its TTL), then go silent.
	stopHB := w.heartbeat(ttl/4, []string{a.GetLeaseToken()}, nil)
	select {
	case r := <-results:
		t.Fatalf("lease lost although renewed: %+v", r.res)
	case <-time.After(2 * ttl):
	}
	stopHB()
	silent := time.Now()
	r := <-results
	if r.err != nil || !r.res.Lost || r.res.Status.GetExitCode() != -1 || !strings.Contains(r.res.Status.GetError(), "worker lost") {
		t.Fatalf("result %+v, %v", r.res, r.err)
	}
	if time.Since(silent) < ttl/2 || time.Since(start) < 2*ttl {
		t.Errorf("lease lost too early: %v after the last heartbeat", time.Since(silent))
	}
	// Late reports are refused.
	late, err := e.client.CompleteAssignment(ctx, &decreev1.CompleteAssignmentRequest{LeaseToken: a.GetLeaseToken(), Status: &decreev1.ExitStatus{}})
	if err != nil || late.GetAccepted() || !strings.Contains(late.GetNote(), "worker lost") {
		t.Fatalf("late complete: %v %v", late, err)
	}
	if _, err := upload(ctx, e.client, a.GetLeaseToken(), chunk(0, 0, "late")); status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("late upload: %v", err)
	}
	hb, err := e.client.Heartbeat(ctx, &decreev1.HeartbeatRequest{SessionId: w.session, LeaseTokens: []string{a.GetLeaseToken()}})
	if err != nil || len(hb.GetStopLeases()) != 1 {
		t.Fatalf("heartbeat after loss: %v %v", hb, err)
	}
	if _, err := e.client.Heartbeat(ctx, &decreev1.HeartbeatRequest{SessionId: "nope"}); status.Code(err) != codes.NotFound {
		t.Fatalf("unknown session: %v", err)
	}
}

func TestCancelAsksWorkerToStop(t *testing.T) {
	e := newEnv(t, 5*time.Second)
	w := e.worker(t, "w", e.st.InstanceID(), "shell")
	ctx, cancel := context.WithCancel(context.Background())
	results := dispatch(ctx, e.m, &lease.Work{Kind: lease.WorkRoutine, MessageID: msgID, Attempt: 1}, lease.Requirements{})
	a := w.next(5 * time.Second)
	if a == nil {
		t.Fatal("no assignment")
	}
	stops := make(chan string, 1)
	stopHB := w.heartbeat(50*time.Millisecond, []string{a.GetLeaseToken()}, stops)
	defer stopHB()
	cancel()
	select {
	case tok := <-stops:
		if tok != a.GetLeaseToken() {
			t.Fatalf("asked to stop %s", tok)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("worker was not asked to stop")
	}
	select {
	case r := <-results:
		t.Fatalf("Dispatch returned before the worker stopped: %+v", r)
	default:
	}
	resp, err := e.client.CompleteAssignment(context.Background(), &decreev1.CompleteAssignmentRequest{LeaseToken: a.GetLeaseToken(), Status: &decreev1.ExitStatus{ExitCode: -1, Signal: 15}})
	if err != nil || !resp.GetAccepted() {
		t.Fatalf("complete after stop: %v %v", resp, err)
	}
	r := <-results
	if !errors.Is(r.err, context.Canceled) || r.res.Status.GetSignal() != 15 {
		t.Fatalf("result %+v, %v", r.res, r.err)
	}
}

func TestDispatchWaitsForAWorker(t *testing.T) {
	e := newEnv(t, 5*time.Second)
	ctx, cancel := context.WithCancel(context.Background())
	results := dispatch(ctx, e.m, &lease.Work{Kind: lease.WorkRouter, Command: "true"}, lease.Requirements{})
	w := e.worker(t, "late-comer", "", "shell")
	a := w.next(5 * time.Second)
	if a == nil || a.GetKind() != decreev1.AssignmentKind_ASSIGNMENT_KIND_ROUTER {
		t.Fatalf("assignment %v", a)
	}
	e.client.CompleteAssignment(ctx, &decreev1.CompleteAssignmentRequest{LeaseToken: a.GetLeaseToken(), Status: &decreev1.ExitStatus{}, Output: []byte("develop\n")})
	if r := <-results; string(r.res.Output) != "develop\n" {
		t.Fatalf("router output %q", r.res.Output)
	}
	// Cancelling while no worker qualifies returns at once.
	results = dispatch(ctx, e.m, &lease.Work{Kind: lease.WorkRouter}, lease.Requirements{Driver: "none"})
	cancel()
	if r := <-results; !errors.Is(r.err, context.Canceled) {
		t.Fatalf("cancel while pending: %v", r.err)
	}
	if _, err := e.client.RegisterWorker(context.Background(), &decreev1.RegisterWorkerRequest{WorkerId: ""}); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("empty worker id: %v", err)
	}
	if ws := e.m.Workers(); len(ws) != 1 || ws[0].GetId() != "late-comer" || !ws[0].GetConnected() {
		t.Fatalf("workers %v", ws)
	}
}

// A worker that reconnects (registers again under the same id) keeps its
// lease: renewing and completing under the new session works.
func TestReconnectKeepsLease(t *testing.T) {
	const ttl = 600 * time.Millisecond
	e := newEnv(t, ttl)
	ctx := context.Background()
	w1 := e.worker(t, "same", e.st.InstanceID(), "shell")
	results := dispatch(ctx, e.m, &lease.Work{Kind: lease.WorkRoutine, MessageID: msgID, Attempt: 1}, lease.Requirements{})
	a := w1.next(5 * time.Second)
	if a == nil {
		t.Fatal("no assignment")
	}
	w1.cancel()
	w2 := e.worker(t, "same", e.st.InstanceID(), "shell")
	if _, err := e.client.Heartbeat(ctx, &decreev1.HeartbeatRequest{SessionId: w1.session}); status.Code(err) != codes.NotFound {
		t.Fatalf("old session still valid: %v", err)
	}
	stopHB := w2.heartbeat(ttl/4, []string{a.GetLeaseToken()}, nil)
	defer stopHB()
	select { // longer than the TTL: only renewals keep it alive
	case r := <-results:
		t.Fatalf("the lease ended although the new session renewed it: %+v", r.res)
	case <-time.After(2 * ttl):
	}
	resp, err := e.client.CompleteAssignment(ctx, &decreev1.CompleteAssignmentRequest{LeaseToken: a.GetLeaseToken(), Status: &decreev1.ExitStatus{}})
	if err != nil || !resp.GetAccepted() {
		t.Fatalf("complete after reconnect: %v %v", resp, err)
	}
	if r := <-results; r.res.Lost || r.res.WorkerID != "same" {
		t.Fatalf("result %+v", r.res)
	}
}
