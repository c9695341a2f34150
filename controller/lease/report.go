package lease

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/decreehq/decree/controller/logbook"
	decreev1 "github.com/decreehq/decree/proto/decree/v1"
)

// DefaultStream is the log stream of a chunk that names none.
const DefaultStream = "routine"

// Complete records a worker's report for a lease. The first report of an
// active lease is accepted and ends Dispatch; a repeat gets the first
// answer again with the note "duplicate"; a report on a lease that was
// lost or cancelled is not accepted and the note says why.
func (m *Manager) Complete(req *decreev1.CompleteAssignmentRequest) (*decreev1.CompleteAssignmentResponse, error) {
	if req.GetStatus() == nil {
		return nil, fmt.Errorf("%w: CompleteAssignment needs an exit status", ErrInvalid)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	l := m.leases[req.GetLeaseToken()]
	if l == nil {
		return &decreev1.CompleteAssignmentResponse{Accepted: false,
			Note: "unknown lease (the controller may have restarted, or the lease ended long ago); the result was ignored"}, nil
	}
	if l.resp != nil {
		return &decreev1.CompleteAssignmentResponse{Accepted: l.resp.GetAccepted(), Note: "duplicate"}, nil
	}
	switch l.state {
	case stateActive:
		res := Result{
			Status:   req.GetStatus(),
			Output:   req.GetOutput(),
			Files:    req.GetFiles(),
			Manifest: req.GetWorkspaceManifest(),
			// Only a replica's tree is taken; an in-place worker already
			// changed the controller's tree itself.
			WorkspaceReturned: req.GetWorkspaceReturned() && !l.sess.inPlace,
			LogSizes:          maps.Clone(req.GetLogSizes()),
			WorkerID:          l.sess.req.GetWorkerId(),
		}
		for _, stream := range slices.Sorted(maps.Keys(req.GetLogSizes())) {
			if l.a.GetMessageId() == "" || l.a.GetAttempt() < 1 {
				break
			}
			k := logbook.Key{MessageID: l.a.GetMessageId(), Attempt: int(l.a.GetAttempt()), Stream: stream}
			if got, err := m.opts.Logs.Size(k); err != nil || got < req.GetLogSizes()[stream] {
				res.LogsIncomplete = append(res.LogsIncomplete, stream)
			}
		}
		l.resp = &decreev1.CompleteAssignmentResponse{Accepted: true}
		if l.stop {
			l.resp.Note = "stopped at the controller's request"
		}
		m.endLocked(l, res, "")
	default:
		l.resp = &decreev1.CompleteAssignmentResponse{Accepted: false,
			Note: "lease ended before the report arrived (" + l.endNote + "); the result was ignored"}
	}
	return &decreev1.CompleteAssignmentResponse{Accepted: l.resp.GetAccepted(), Note: l.resp.GetNote()}, nil
}

// UploadLog stores one log chunk under a lease and returns the stream name
// used and the bytes stored for it afterwards. The chunk must belong to the
// lease's message and attempt. See logbook.Book.Append for resends and gaps.
func (m *Manager) UploadLog(token string, c *decreev1.LogChunk) (string, uint64, error) {
	m.mu.Lock()
	l := m.leases[token]
	var err error
	switch {
	case l == nil:
		err = fmt.Errorf("%w: log upload with an unknown lease token", ErrUnknownLease)
	case l.state != stateActive && !l.resp.GetAccepted():
		err = fmt.Errorf("%w: %s; stop uploading logs for it", ErrLeaseEnded, l.endNote)
	case c == nil:
		err = fmt.Errorf("%w: log upload without a chunk", ErrInvalid)
	case c.GetMessageId() != l.a.GetMessageId() || c.GetAttempt() != l.a.GetAttempt():
		err = fmt.Errorf("%w: chunk for %s attempt %d sent under the lease of %s attempt %d",
			ErrInvalid, c.GetMessageId(), c.GetAttempt(), l.a.GetMessageId(), l.a.GetAttempt())
	case l.a.GetMessageId() == "" || l.a.GetAttempt() < 1:
		err = fmt.Errorf("%w: this assignment has no message attempt to store logs under", ErrInvalid)
	}
	m.mu.Unlock()
	if err != nil {
		return "", 0, err
	}
	stream := c.GetStream()
	if stream == "" {
		stream = DefaultStream
	}
	k := logbook.Key{MessageID: c.GetMessageId(), Attempt: int(c.GetAttempt()), Stream: stream}
	stored, err := m.opts.Logs.Append(k, c.GetOffset(), c.GetData())
	if errors.Is(err, logbook.ErrTooManyStreams) || errors.Is(err, logbook.ErrChunkTooLarge) {
		err = fmt.Errorf("%w: %w", ErrInvalid, err) // the worker must not retry it
	}
	return stream, stored, err
}

// Follow passes a log's bytes from offset to fn, waiting for more while the
// attempt runs; see logbook.Book.Follow.
func (m *Manager) Follow(ctx context.Context, messageID string, attempt int, stream string, offset uint64, fn func(offset uint64, data []byte) error) error {
	return m.FollowPending(ctx, messageID, attempt, stream, offset, nil, fn)
}

// FollowPending is Follow that waits for a log not written yet while
// pending reports true; see logbook.Book.FollowPending.
func (m *Manager) FollowPending(ctx context.Context, messageID string, attempt int, stream string, offset uint64, pending func() bool, fn func(offset uint64, data []byte) error) error {
	if stream == "" {
		stream = DefaultStream
	}
	return m.opts.Logs.FollowPending(ctx, logbook.Key{MessageID: messageID, Attempt: attempt, Stream: stream}, offset, pending, fn)
}
