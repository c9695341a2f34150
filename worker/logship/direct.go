package logship

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	decreev1 "github.com/decreehq/decree/proto/decree/v1"
	"github.com/decreehq/decree/worker/backoff"
)

// Direct writes one log stream straight to a Client whose Send stores each
// chunk before it returns: a controller in the worker's own process (the
// controller's LocalLogs, see worker.Options.Logs). With no connection in
// between there is nothing to acknowledge later, so no window is needed:
// each Write is stored as chunks of the caller's own bytes, by the caller's
// goroutine, before it returns. (Through a Buffer and an Uploader every byte
// was copied twice more and handed between goroutines: measured, that was a
// third of the embedded worker's CPU streaming 200 MB.) Over a network use
// a Buffer and an Uploader: there a Send returns before anything is stored.
//
// Chunks carry the same sequence numbers and offsets as the Uploader's. A
// failed call is retried with backoff from the bytes stored (the log book
// skips what it has) while the routine waits in Write, as a full window
// makes it wait; a refusal (Permanent: the lease ended, a stream too many)
// fails that Write and every later one. Close checks that the controller
// holds every byte written.
type Direct struct {
	Client     Client
	LeaseToken string
	MessageID  string
	Attempt    int32
	// Stream is the log's name ("routine", "hook", "router").
	Stream string
	Logger *slog.Logger
	// Backoff spaces retries after failed calls.
	Backoff backoff.Policy
	// ChunkSize is the largest chunk (DefaultChunkSize when zero, at most
	// MaxChunkSize).
	ChunkSize int
	// Ctx bounds retries (nil: context.Background()).
	Ctx context.Context

	mu      sync.Mutex
	call    grpc.ClientStreamingClient[decreev1.UploadLogsRequest, decreev1.UploadLogsResponse]
	off     uint64 // bytes written (and stored: Send stores)
	seq     uint64
	err     error
	closed  bool
	Retries int // failed calls retried, readable after Close
}

var _ io.WriteCloser = (*Direct)(nil)

func (d *Direct) context() context.Context {
	if d.Ctx == nil {
		return context.Background()
	}
	return d.Ctx
}

func (d *Direct) fail(err error) error {
	d.err = fmt.Errorf("upload %s log of %s: %w", d.Stream, d.MessageID, err)
	return d.err
}

// Write stores p as one or more chunks before it returns.
func (d *Direct) Write(p []byte) (int, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.err != nil {
		return 0, d.err
	}
	if d.closed {
		return 0, ErrClosed
	}
	chunk := chunkSize(d.ChunkSize)
	n := 0
	for failures := 0; len(p) > 0; {
		k := min(len(p), chunk)
		err := d.send(p[:k])
		if err == nil {
			d.seq++
			d.off += uint64(k)
			n += k
			p = p[k:]
			failures = 0
			continue
		}
		d.call = nil
		ctx := d.context()
		if Permanent(err) || ctx.Err() != nil {
			return n, d.fail(err)
		}
		d.Retries++
		if d.Logger != nil {
			d.Logger.Warn("log upload failed; will resend from the stored offset",
				"message", d.MessageID, "stream", d.Stream, "stored", d.off, "err", err)
		}
		if serr := d.Backoff.Sleep(ctx, failures); serr != nil {
			return n, d.fail(errors.Join(err, serr))
		}
		failures++
	}
	return n, nil
}

// send stores one chunk at the current offset, opening a call if needed.
func (d *Direct) send(data []byte) error {
	if d.call == nil {
		call, err := d.Client.UploadLogs(d.context())
		if err != nil {
			return err
		}
		d.call = call
	}
	err := d.call.Send(&decreev1.UploadLogsRequest{LeaseToken: d.LeaseToken, Chunk: &decreev1.LogChunk{
		MessageId: d.MessageID, Attempt: d.Attempt, Stream: d.Stream, Sequence: d.seq, Offset: d.off, Data: data}})
	if errors.Is(err, io.EOF) {
		// The call ended; its status says why.
		if _, err = d.call.CloseAndRecv(); err == nil {
			err = status.Error(codes.Internal, "controller ended the log upload without an error")
		}
	}
	return err
}

// Size is the number of bytes written and stored.
func (d *Direct) Size() uint64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.off
}

// Close ends the upload and checks that the controller holds every byte
// written; it returns the error that stopped the stream, if any.
func (d *Direct) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed || d.err != nil {
		d.closed = true
		return d.err
	}
	d.closed = true
	if d.call == nil {
		return nil
	}
	resp, err := d.call.CloseAndRecv()
	d.call = nil
	if err != nil {
		return d.fail(err)
	}
	if got, ok := resp.GetStoredOffsets()[d.Stream]; ok && got != d.off {
		return d.fail(fmt.Errorf("the controller holds %d bytes of the %d written", got, d.off))
	}
	return nil
}
