package rpc

import (
	"context"
	"io"
	"sync"

	"github.com/decreehq/decree/controller/lease"
	"github.com/decreehq/decree/pkg/inproc"
	decreev1 "github.com/decreehq/decree/proto/decree/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// LocalLogs is WorkerService.UploadLogs for a worker running in the
// controller's own process (decreectl's embedded worker): each chunk goes
// straight to the lease manager and the log book. Over the socket every
// chunk was encoded, copied into gRPC's frames, written to the socket,
// read, reassembled into one buffer and decoded into a copy before its
// bytes reached the log file; in-process Send stores the chunk before it
// returns, so the worker writes the routine's output through as it reads
// it (worker.Options.Logs). Everything else is the RPC's: the same lease
// checks, the same stored offsets, and errors as the gRPC statuses the RPC
// answers (scrubbed of the project's path), so the worker retries and
// gives up exactly as it does over a connection.
//
// Its UploadLogs has the generated client's signature, so a LocalLogs
// stands in wherever the worker takes that client.
type LocalLogs struct {
	m     *lease.Manager
	scrub *Scrubber
}

// NewLocalLogs returns the in-process UploadLogs of m; scrub (nil for none)
// rewrites error messages as the server's interceptor does.
func NewLocalLogs(m *lease.Manager, scrub *Scrubber) *LocalLogs {
	return &LocalLogs{m: m, scrub: scrub}
}

// UploadLogs opens an in-process upload: Send stores a chunk at once,
// CloseAndRecv answers the stored offsets.
func (l *LocalLogs) UploadLogs(ctx context.Context, _ ...grpc.CallOption) (grpc.ClientStreamingClient[decreev1.UploadLogsRequest, decreev1.UploadLogsResponse], error) {
	if err := ctx.Err(); err != nil {
		return nil, status.FromContextError(err).Err()
	}
	u := &localUpload{l: l, ctx: ctx, stored: map[string]uint64{}}
	return &inproc.ClientStream[decreev1.UploadLogsRequest, decreev1.UploadLogsResponse]{Ctx: ctx, SendFunc: u.Send, CloseFunc: u.CloseAndRecv}, nil
}

// localUpload is one in-process UploadLogs call.
type localUpload struct {
	l      *LocalLogs
	ctx    context.Context
	mu     sync.Mutex
	stored map[string]uint64
	err    error // the call's end, as the server's status
	closed bool
}

func (u *localUpload) status(err error) error {
	err = Status(err)
	if u.l.scrub != nil {
		err = u.l.scrub.Err(err)
	}
	return err
}

// Send stores the chunk. Like a gRPC client stream, a refusal ends the
// call: Send returns io.EOF and CloseAndRecv the refusal's status.
func (u *localUpload) Send(req *decreev1.UploadLogsRequest) error {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.closed {
		return status.Error(codes.Internal, "send on a closed log upload")
	}
	if u.err != nil {
		return io.EOF
	}
	if err := u.ctx.Err(); err != nil {
		u.err = status.FromContextError(err).Err()
		return u.err
	}
	name, n, err := u.l.m.UploadLog(req.GetLeaseToken(), req.GetChunk())
	if err != nil {
		u.err = u.status(err)
		return io.EOF
	}
	u.stored[name] = n
	return nil
}

// CloseAndRecv ends the call with the stored offsets or its refusal.
func (u *localUpload) CloseAndRecv() (*decreev1.UploadLogsResponse, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.closed = true
	if u.err != nil {
		return nil, u.err
	}
	if err := u.ctx.Err(); err != nil {
		return nil, status.FromContextError(err).Err()
	}
	return &decreev1.UploadLogsResponse{StoredOffsets: u.stored}, nil
}
