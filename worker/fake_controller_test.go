package worker_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"hash"
	"io"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	decreev1 "github.com/decreehq/decree/proto/decree/v1"
)

// fakeController is a test double of the controller's WorkerService: it
// hands out queued assignments, stores log chunks the way the contract says
// (skip what it has by offset, refuse gaps), records heartbeats and
// completions, and stops leases on request.
type fakeController struct {
	decreev1.UnimplementedWorkerServiceServer

	inPlace   bool
	heartbeat time.Duration
	// leaseTTL is what workers are told (5s: heartbeats are slow under the
	// race detector on a loaded machine, and the supervisor kills work at
	// the lease deadline); lease tests shorten it.
	leaseTTL time.Duration
	keepData bool // store log bytes (else only size and hash)
	// failHeartbeats makes every heartbeat fail as if the controller could
	// not be reached.
	failHeartbeats bool
	// failCompletes makes every CompleteAssignment fail as unreachable.
	failCompletes bool

	assignments chan *decreev1.Assignment
	completed   chan *decreev1.CompleteAssignmentRequest

	mu            sync.Mutex
	registrations []*decreev1.RegisterWorkerRequest
	heartbeats    []*decreev1.HeartbeatRequest
	logs          map[string]*fakeLog // lease + "/" + stream
	completions   map[string]*decreev1.CompleteAssignmentRequest
	stop          map[string]bool
	leases        map[string]bool
	uploadCalls   int
	refused       []*decreev1.CompleteAssignmentRequest // completions of unknown leases
	// onData is called (without mu) after new bytes were stored; when it
	// returns true, the upload hangs until the connection goes away.
	onData func(token, stream string, size uint64) (hang bool)
}

// chunkMeta describes a received chunk that brought new bytes; stored is
// the stored size before it.
type chunkMeta struct {
	seq, offset, size, stored uint64
	attempt                   int32
	messageID, stream         string
}

type fakeLog struct {
	data    bytes.Buffer
	sum     hash.Hash
	size    uint64
	skipped uint64
	chunks  []chunkMeta // chunks that brought new bytes
}

func newFakeController() *fakeController {
	return &fakeController{
		inPlace:     true,
		heartbeat:   50 * time.Millisecond,
		leaseTTL:    5 * time.Second,
		keepData:    true,
		assignments: make(chan *decreev1.Assignment, 16),
		completed:   make(chan *decreev1.CompleteAssignmentRequest, 16),
		logs:        map[string]*fakeLog{},
		completions: map[string]*decreev1.CompleteAssignmentRequest{},
		stop:        map[string]bool{},
		leases:      map[string]bool{},
	}
}

func (f *fakeController) assign(a *decreev1.Assignment) {
	f.mu.Lock()
	f.leases[a.GetLeaseToken()] = true
	f.mu.Unlock()
	f.assignments <- a
}

func (f *fakeController) RegisterWorker(_ context.Context, req *decreev1.RegisterWorkerRequest) (*decreev1.RegisterWorkerResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.registrations = append(f.registrations, req)
	return &decreev1.RegisterWorkerResponse{
		SessionId:         fmt.Sprintf("session-%d", len(f.registrations)),
		HeartbeatInterval: durationpb.New(f.heartbeat),
		LeaseTtl:          durationpb.New(f.leaseTTL),
		InPlace:           f.inPlace,
	}, nil
}

func (f *fakeController) StreamAssignments(req *decreev1.StreamAssignmentsRequest, stream grpc.ServerStreamingServer[decreev1.StreamAssignmentsResponse]) error {
	if req.GetSessionId() == "" {
		return status.Error(codes.InvalidArgument, "no session")
	}
	for {
		select {
		case <-stream.Context().Done():
			return nil
		case a := <-f.assignments:
			if err := stream.Send(&decreev1.StreamAssignmentsResponse{Assignment: a}); err != nil {
				return err
			}
		}
	}
}

func (f *fakeController) Heartbeat(_ context.Context, req *decreev1.HeartbeatRequest) (*decreev1.HeartbeatResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.heartbeats = append(f.heartbeats, req)
	if f.failHeartbeats {
		return nil, status.Error(codes.Unavailable, "heartbeats are failing in this test")
	}
	resp := &decreev1.HeartbeatResponse{}
	for _, tok := range req.GetLeaseTokens() {
		if f.stop[tok] {
			resp.StopLeases = append(resp.StopLeases, tok)
		}
	}
	return resp, nil
}

func (f *fakeController) UploadLogs(stream grpc.ClientStreamingServer[decreev1.UploadLogsRequest, decreev1.UploadLogsResponse]) error {
	f.mu.Lock()
	f.uploadCalls++
	f.mu.Unlock()
	offsets := map[string]uint64{}
	for {
		req, err := stream.Recv()
		if err == io.EOF {
			return stream.SendAndClose(&decreev1.UploadLogsResponse{StoredOffsets: offsets})
		}
		if err != nil {
			return err
		}
		c := req.GetChunk()
		tok := req.GetLeaseToken()
		f.mu.Lock()
		if !f.leases[tok] {
			f.mu.Unlock()
			return status.Errorf(codes.FailedPrecondition, "lease %q unknown", tok)
		}
		key := tok + "/" + c.GetStream()
		l := f.logs[key]
		if l == nil {
			l = &fakeLog{sum: sha256.New()}
			f.logs[key] = l
		}
		if c.GetOffset() > l.size {
			f.mu.Unlock()
			return status.Errorf(codes.OutOfRange, "gap: chunk at %d, stored %d", c.GetOffset(), l.size)
		}
		data := c.GetData()
		skip := l.size - c.GetOffset()
		grew := false
		if skip >= uint64(len(data)) {
			l.skipped += uint64(len(data))
		} else {
			l.skipped += skip
			fresh := data[skip:]
			if f.keepData {
				l.data.Write(fresh)
			}
			l.sum.Write(fresh)
			l.chunks = append(l.chunks, chunkMeta{seq: c.GetSequence(), offset: c.GetOffset(), size: uint64(len(data)), stored: l.size, attempt: c.GetAttempt(), messageID: c.GetMessageId(), stream: c.GetStream()})
			l.size += uint64(len(fresh))
			grew = true
		}
		offsets[c.GetStream()] = l.size
		onData, size := f.onData, l.size
		f.mu.Unlock()
		if grew && onData != nil && onData(tok, c.GetStream(), size) {
			<-stream.Context().Done()
			return stream.Context().Err()
		}
	}
}

func (f *fakeController) CompleteAssignment(_ context.Context, req *decreev1.CompleteAssignmentRequest) (*decreev1.CompleteAssignmentResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failCompletes {
		return nil, status.Error(codes.Unavailable, "completions are failing in this test")
	}
	if !f.leases[req.GetLeaseToken()] {
		f.refused = append(f.refused, req)
		return nil, status.Errorf(codes.FailedPrecondition, "lease unknown")
	}
	if _, dup := f.completions[req.GetLeaseToken()]; dup {
		return &decreev1.CompleteAssignmentResponse{Accepted: true, Note: "duplicate"}, nil
	}
	f.completions[req.GetLeaseToken()] = req
	f.completed <- req
	return &decreev1.CompleteAssignmentResponse{Accepted: true}, nil
}

// logOf returns a copy of the stored log (bytes, accepted chunks, skipped).
func (f *fakeController) logOf(token, stream string) ([]byte, []chunkMeta, uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	l := f.logs[token+"/"+stream]
	if l == nil {
		return nil, nil, 0
	}
	return bytes.Clone(l.data.Bytes()), append([]chunkMeta(nil), l.chunks...), l.skipped
}

func (f *fakeController) registrationCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.registrations)
}

// server serves a fakeController on a unix socket and can be restarted on
// the same path, dropping every connection.
type server struct {
	t    testing.TB
	sock string
	fake *fakeController
	mu   sync.Mutex
	srv  *grpc.Server
}

func startServer(t testing.TB, sock string, fake *fakeController) *server {
	s := &server{t: t, sock: sock, fake: fake}
	s.start()
	t.Cleanup(func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.srv.Stop()
	})
	return s
}

func (s *server) start() {
	s.t.Helper()
	if err := os.MkdirAll(filepath.Dir(s.sock), 0o755); err != nil {
		s.t.Fatal(err)
	}
	lis, err := net.Listen("unix", s.sock)
	if err != nil {
		s.t.Fatalf("listen on %s: %v", s.sock, err)
	}
	srv := grpc.NewServer()
	decreev1.RegisterWorkerServiceServer(srv, s.fake)
	s.mu.Lock()
	s.srv = srv
	s.mu.Unlock()
	go func() { _ = srv.Serve(lis) }()
}

// restart closes the server and every connection, then serves again on the
// same socket.
func (s *server) restart() {
	s.mu.Lock()
	old := s.srv
	s.mu.Unlock()
	old.Stop()
	_ = os.Remove(s.sock)
	s.start()
}
