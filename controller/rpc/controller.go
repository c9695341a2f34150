package rpc

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"os"

	"github.com/decreehq/decree/controller/crontab"
	"github.com/decreehq/decree/controller/events"
	"github.com/decreehq/decree/controller/lease"
	"github.com/decreehq/decree/controller/logbook"
	"github.com/decreehq/decree/controller/pipeline"
	"github.com/decreehq/decree/controller/store"
	"github.com/decreehq/decree/pkg/config"
	decreev1 "github.com/decreehq/decree/proto/decree/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// ControllerDeps are the domain objects ControllerServer adapts.
type ControllerDeps struct {
	Store    *store.Store
	Pipeline *pipeline.Pipeline
	// Service takes clients' requests (submit, cancel, requeue, revert).
	Service *pipeline.Service
	Events  *events.Log
	Leases  *lease.Manager
	Logs    *logbook.Book
	Config  func() (*config.Config, error)
	Version string
	// Cron lists .decree/cron/ (ListCronEntries).
	Cron *crontab.Scheduler
	// Daemon says the controller serves the project unattended.
	Daemon bool
}

// ControllerServer implements decree.v1.ControllerService: each method
// translates the request, calls the domain, and maps errors with Status.
type ControllerServer struct {
	decreev1.UnimplementedControllerServiceServer
	d ControllerDeps
}

// NewControllerServer returns the adapter.
func NewControllerServer(d ControllerDeps) *ControllerServer { return &ControllerServer{d: d} }

// ProcessMigrations lists migrations and starts a job.
func (s *ControllerServer) ProcessMigrations(ctx context.Context, req *decreev1.ProcessMigrationsRequest) (*decreev1.ProcessMigrationsResponse, error) {
	migs, job, seq, err := s.d.Pipeline.ProcessMigrations(ctx, req.GetDryRun())
	if err != nil {
		return nil, Status(err)
	}
	resp := &decreev1.ProcessMigrationsResponse{JobId: job, EventSequence: seq}
	for _, m := range migs {
		resp.Migrations = append(resp.Migrations, &decreev1.Migration{File: m.File, Processed: m.Processed, QueuedMessageId: m.Queued})
	}
	return resp, nil
}

// WatchEvents streams events.
func (s *ControllerServer) WatchEvents(req *decreev1.WatchEventsRequest, stream decreev1.ControllerService_WatchEventsServer) error {
	chain, job := req.GetChain(), req.GetJobId()
	w := s.d.Events.Watch(events.WatchOptions{From: req.GetFromSequence(), Follow: req.GetFollow(), Filter: func(ev *events.Event) bool {
		return (chain == "" || ev.Chain == chain) && (job == "" || ev.JobID == job)
	}})
	defer w.Close()
	for {
		ev, err := w.Next(stream.Context())
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return Status(err)
		}
		if err := stream.Send(&decreev1.WatchEventsResponse{Event: eventProto(ev)}); err != nil {
			return err
		}
	}
}

// WatchLogs streams an attempt's log from an offset.
func (s *ControllerServer) WatchLogs(req *decreev1.WatchLogsRequest, stream decreev1.ControllerService_WatchLogsServer) error {
	id := req.GetMessageId()
	if err := store.CheckID(id); err != nil {
		return Status(err)
	}
	attempt := int(req.GetAttempt())
	run, err := s.d.Store.OpenRun(id)
	if err != nil && req.GetFollow() {
		run, err = waitRun(stream.Context(), s.d.Store, id)
	}
	if err != nil {
		return Status(err)
	}
	made := len(run.State().Attempts)
	if attempt <= 0 {
		attempt = max(made, 1)
	}
	if err := missingAttempt(id, attempt, made, req.GetFollow() && run.State().Outcome == ""); err != nil {
		return err
	}
	streamName := req.GetStream()
	if streamName == "" {
		streamName = lease.DefaultStream
	}
	var seq uint64
	send := func(off uint64, data []byte) error {
		c := &decreev1.LogChunk{MessageId: id, Attempt: int32(attempt), Stream: streamName, Sequence: seq, Offset: off, Data: data}
		seq++
		return stream.Send(&decreev1.WatchLogsResponse{Chunk: c})
	}
	if err := s.checkLogOffset(id, attempt, streamName, req.GetOffset()); err != nil {
		return err
	}
	if req.GetFollow() {
		// The attempt may not have begun yet: wait for its log while the
		// run is in progress.
		return Status(s.d.Leases.FollowPending(stream.Context(), id, attempt, streamName, req.GetOffset(), runInProgress(s.d.Store, id), send))
	}
	p, err := s.d.Store.LogPath(id, attempt, streamName)
	if err != nil {
		return Status(err)
	}
	err = sendFile(p, req.GetOffset(), send)
	if errors.Is(err, fs.ErrNotExist) {
		return status.Errorf(codes.NotFound, "attempt %d of %s wrote no %s log", attempt, id, streamName)
	}
	return Status(err)
}

// missingAttempt is NOT_FOUND for an attempt of message id that was not
// made (made attempts so far); while the run goes on (live), a later
// attempt of a followed log may still come, up to the next one.
func missingAttempt(id string, attempt, made int, live bool) error {
	if attempt <= made || live && attempt == made+1 {
		return nil
	}
	if made == 0 {
		return status.Errorf(codes.NotFound, "message %s has no attempt %d: none was made", id, attempt)
	}
	return status.Errorf(codes.NotFound, "message %s has no attempt %d: it made %d", id, attempt, made)
}

// checkLogOffset refuses an offset past the end of a log that no longer
// grows (OUT_OF_RANGE); a live attempt's log may still reach it.
func (s *ControllerServer) checkLogOffset(id string, attempt int, stream string, offset uint64) error {
	if offset == 0 || s.d.Logs == nil || s.d.Logs.Live(id, attempt) {
		return nil
	}
	size, err := s.d.Logs.Size(logbook.Key{MessageID: id, Attempt: attempt, Stream: stream})
	if err != nil {
		return Status(err)
	}
	if offset > size {
		return status.Errorf(codes.OutOfRange, "offset %d is past the end of the %s log of %s attempt %d (%d bytes)", offset, stream, id, attempt, size)
	}
	return nil
}

// sendFile passes a file's bytes from offset to send in chunks.
func sendFile(path string, offset uint64, send func(uint64, []byte) error) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if _, err := f.Seek(int64(offset), io.SeekStart); err != nil {
		return err
	}
	return sendReader(f, offset, send)
}

// GetRun returns one run.
func (s *ControllerServer) GetRun(ctx context.Context, req *decreev1.GetRunRequest) (*decreev1.GetRunResponse, error) {
	if err := store.CheckID(req.GetId()); err != nil {
		return nil, Status(err)
	}
	run, err := s.d.Store.OpenRun(req.GetId())
	if err != nil {
		return nil, Status(err)
	}
	return &decreev1.GetRunResponse{Run: runInfo(run)}, nil
}

// RequeueMessage moves a dead letter back to the inbox.
func (s *ControllerServer) RequeueMessage(ctx context.Context, req *decreev1.RequeueMessageRequest) (*decreev1.RequeueMessageResponse, error) {
	e, err := s.d.Service.Requeue(ctx, req.GetId())
	if err != nil {
		return nil, Status(err)
	}
	return &decreev1.RequeueMessageResponse{Message: entryInfo(e)}, nil
}

// RevertMessage undoes a completed message.
func (s *ControllerServer) RevertMessage(ctx context.Context, req *decreev1.RevertMessageRequest) (*decreev1.RevertMessageResponse, error) {
	paths, err := s.d.Service.Revert(ctx, req.GetId())
	if err != nil {
		return nil, Status(err)
	}
	return &decreev1.RevertMessageResponse{Paths: paths}, nil
}

// ListWorkers lists workers.
func (s *ControllerServer) ListWorkers(ctx context.Context, req *decreev1.ListWorkersRequest) (*decreev1.ListWorkersResponse, error) {
	return &decreev1.ListWorkersResponse{Workers: s.d.Leases.Workers()}, nil
}
