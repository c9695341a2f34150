// Package rpc holds the controller's gRPC adapters: thin translations
// between the generated decree.v1 services and the domain types, with one
// function (Status) mapping domain errors to gRPC status codes.
package rpc

import (
	"io/fs"

	"github.com/decreehq/decree/controller/pipeline"
	"github.com/decreehq/decree/controller/replica"
	"github.com/decreehq/decree/controller/store"
	"github.com/decreehq/decree/pkg/checkpoint"
	"github.com/decreehq/decree/pkg/config"
	"github.com/decreehq/decree/pkg/routine"
	"github.com/decreehq/decree/pkg/wiremanifest"
	"google.golang.org/genproto/googleapis/rpc/errdetails"

	"context"
	"errors"
	"io"
	"strconv"

	"github.com/decreehq/decree/controller/events"
	"github.com/decreehq/decree/controller/lease"
	"github.com/decreehq/decree/controller/logbook"
	"github.com/decreehq/decree/pkg/fsutil"
	decreev1 "github.com/decreehq/decree/proto/decree/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Status converts a domain error to a gRPC status error; nil stays nil and
// errors that already carry a status keep it.
func Status(err error) error {
	if err == nil {
		return nil
	}
	if _, ok := status.FromError(err); ok {
		return err
	}
	var gap *logbook.GapError
	var slow *events.SlowWatcherError
	var conflict *pipeline.ConflictError
	if errors.As(err, &slow) {
		return slowStatus(err.Error(), map[string]string{"resume_sequence": strconv.FormatUint(slow.Resume, 10)})
	}
	if errors.As(err, &conflict) {
		st := status.New(codes.FailedPrecondition, err.Error())
		pf := &errdetails.PreconditionFailure{}
		for _, p := range conflict.Paths {
			pf.Violations = append(pf.Violations, &errdetails.PreconditionFailure_Violation{
				Type: "CHANGED_SINCE", Subject: p, Description: "changed since the message completed"})
		}
		if d, derr := st.WithDetails(pf); derr == nil {
			return d.Err()
		}
		return st.Err()
	}
	code := codes.Internal
	switch {
	case errors.Is(err, context.Canceled):
		code = codes.Canceled
	case errors.Is(err, context.DeadlineExceeded):
		code = codes.DeadlineExceeded
	case errors.Is(err, lease.ErrUnknownSession), errors.Is(err, lease.ErrUnknownLease):
		code = codes.NotFound
	case errors.Is(err, lease.ErrLeaseEnded):
		code = codes.FailedPrecondition
	case errors.Is(err, lease.ErrInvalid), errors.Is(err, fsutil.ErrUnsafePath), errors.Is(err, pipeline.ErrInvalid):
		code = codes.InvalidArgument
	case errors.Is(err, store.ErrDamaged):
		code = codes.DataLoss
	case errors.Is(err, pipeline.ErrNotFound), errors.Is(err, store.ErrNotFound), errors.Is(err, routine.ErrRoutineNotFound), errors.Is(err, fs.ErrNotExist):
		code = codes.NotFound
	case errors.Is(err, pipeline.ErrConflict), errors.Is(err, pipeline.ErrBusy), errors.Is(err, config.ErrInvalid):
		code = codes.FailedPrecondition
	case errors.As(err, &gap):
		code = codes.OutOfRange
	case errors.Is(err, lease.ErrClosed), errors.Is(err, events.ErrClosed), errors.Is(err, pipeline.ErrStopping):
		code = codes.Unavailable
	case errors.Is(err, lease.ErrSuperseded):
		code = codes.Aborted
	case errors.Is(err, replica.ErrForbidden):
		code = codes.PermissionDenied
	case errors.Is(err, checkpoint.ErrBlobTooLarge):
		code = codes.ResourceExhausted
	case errors.Is(err, replica.ErrInvalid), errors.Is(err, checkpoint.ErrBlobMismatch), errors.Is(err, wiremanifest.ErrInvalid), errors.Is(err, io.ErrUnexpectedEOF):
		code = codes.InvalidArgument
	case errors.Is(err, replica.ErrNoManifest):
		code = codes.FailedPrecondition
	case errors.Is(err, replica.ErrMissing):
		code = codes.NotFound
	case errors.Is(err, ErrReplicaNotServed):
		code = codes.Unimplemented
	}
	return status.Error(code, err.Error())
}

// SlowWatcherReason is the google.rpc.ErrorInfo reason of a watcher that
// was cut off for falling behind; its metadata say where to resume.
const SlowWatcherReason = "WATCHER_TOO_SLOW"

// errorDomain is the google.rpc.ErrorInfo domain of decree's errors.
const errorDomain = "decree.v1"

// slowStatus is RESOURCE_EXHAUSTED with ErrorInfo details.
func slowStatus(msg string, meta map[string]string) error {
	st := status.New(codes.ResourceExhausted, msg)
	if d, err := st.WithDetails(&errdetails.ErrorInfo{Reason: SlowWatcherReason, Domain: errorDomain, Metadata: meta}); err == nil {
		return d.Err()
	}
	return st.Err()
}

// WorkerServer implements decree.v1.WorkerService over a lease.Manager.
// Replica file transfer (GetWorkspaceManifest, GetBlobs, PutBlobs) needs a
// replica.Service (WithReplica); without one it answers UNIMPLEMENTED.
type WorkerServer struct {
	decreev1.UnimplementedWorkerServiceServer
	m   *lease.Manager
	rep *replica.Service
	st  *store.Store // run files for GetRunFile (WithRunFiles)
}

// NewWorkerServer returns the adapter; register it with
// decreev1.RegisterWorkerServiceServer.
func NewWorkerServer(m *lease.Manager) *WorkerServer { return &WorkerServer{m: m} }

// RegisterWorker opens a session.
func (w *WorkerServer) RegisterWorker(_ context.Context, req *decreev1.RegisterWorkerRequest) (*decreev1.RegisterWorkerResponse, error) {
	resp, err := w.m.Register(req)
	return resp, Status(err)
}

// StreamAssignments pushes the session's assignments.
func (w *WorkerServer) StreamAssignments(req *decreev1.StreamAssignmentsRequest, stream grpc.ServerStreamingServer[decreev1.StreamAssignmentsResponse]) error {
	return Status(w.m.Stream(stream.Context(), req.GetSessionId(), func(a *decreev1.Assignment) error {
		return stream.Send(&decreev1.StreamAssignmentsResponse{Assignment: a})
	}))
}

// Heartbeat renews leases.
func (w *WorkerServer) Heartbeat(_ context.Context, req *decreev1.HeartbeatRequest) (*decreev1.HeartbeatResponse, error) {
	stop, err := w.m.Heartbeat(req.GetSessionId(), req.GetLeaseTokens())
	if err != nil {
		return nil, Status(err)
	}
	return &decreev1.HeartbeatResponse{StopLeases: stop}, nil
}

// UploadLogs stores chunks until the client closes its side, then reports
// the bytes stored per stream. The first refused chunk ends the call with
// its error (OUT_OF_RANGE for a gap: resend from the offset it names).
func (w *WorkerServer) UploadLogs(stream grpc.ClientStreamingServer[decreev1.UploadLogsRequest, decreev1.UploadLogsResponse]) error {
	stored := map[string]uint64{}
	for {
		req, err := stream.Recv()
		if err == io.EOF {
			return stream.SendAndClose(&decreev1.UploadLogsResponse{StoredOffsets: stored})
		}
		if err != nil {
			return err
		}
		name, n, err := w.m.UploadLog(req.GetLeaseToken(), req.GetChunk())
		if err != nil {
			return Status(err)
		}
		stored[name] = n
	}
}

// CompleteAssignment records a result, idempotently per lease token.
func (w *WorkerServer) CompleteAssignment(_ context.Context, req *decreev1.CompleteAssignmentRequest) (*decreev1.CompleteAssignmentResponse, error) {
	resp, err := w.m.Complete(req)
	return resp, Status(err)
}
