package rpc

import (
	"context"
	"errors"

	"github.com/decreehq/decree/controller/replica"
	decreev1 "github.com/decreehq/decree/proto/decree/v1"
	"google.golang.org/grpc"
)

// WithReplica enables the replica RPCs, served by r; it returns w.
func (w *WorkerServer) WithReplica(r *replica.Service) *WorkerServer {
	w.rep = r
	return w
}

// ErrReplicaNotServed is returned by the replica RPCs of a controller
// that serves no replica workspaces.
var ErrReplicaNotServed = errors.New("this controller does not serve replica workspaces; run the worker in the controller's project directory")

func (w *WorkerServer) noReplica() error { return Status(ErrReplicaNotServed) }

// GetWorkspaceManifest returns the manifest the lease's replica must match.
func (w *WorkerServer) GetWorkspaceManifest(_ context.Context, req *decreev1.GetWorkspaceManifestRequest) (*decreev1.GetWorkspaceManifestResponse, error) {
	if w.rep == nil {
		return nil, w.noReplica()
	}
	resp, err := w.rep.Manifest(req.GetLeaseToken())
	return resp, Status(err)
}

// GetBlobs streams contents of the lease's manifest by hash.
func (w *WorkerServer) GetBlobs(req *decreev1.GetBlobsRequest, stream grpc.ServerStreamingServer[decreev1.GetBlobsResponse]) error {
	if w.rep == nil {
		return w.noReplica()
	}
	return Status(w.rep.SendBlobs(stream.Context(), req.GetLeaseToken(), req.GetSha256(), stream.Send))
}

// PutBlobs stores verified uploads under an active lease.
func (w *WorkerServer) PutBlobs(stream grpc.ClientStreamingServer[decreev1.PutBlobsRequest, decreev1.PutBlobsResponse]) error {
	if w.rep == nil {
		return w.noReplica()
	}
	stored, err := w.rep.ReceiveBlobs(stream.Recv)
	if err != nil {
		return Status(err)
	}
	return stream.SendAndClose(&decreev1.PutBlobsResponse{Stored: stored})
}
