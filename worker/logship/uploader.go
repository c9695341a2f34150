package logship

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	decreev1 "github.com/decreehq/decree/proto/decree/v1"
	"github.com/decreehq/decree/worker/backoff"
)

// Client is the part of decreev1.WorkerServiceClient the Uploader uses.
type Client interface {
	UploadLogs(ctx context.Context, opts ...grpc.CallOption) (grpc.ClientStreamingClient[decreev1.UploadLogsRequest, decreev1.UploadLogsResponse], error)
}

// Defaults for the Uploader's tuning fields.
const (
	// DefaultChunkSize is just under 1 MiB so that a chunk's message
	// (the bytes plus about a hundred of lease, message, stream and
	// offsets) fits gRPC's 1 MiB buffer class with little to spare: gRPC
	// takes each message's buffer from size classes of 32 KiB and 1 MiB
	// and clears the whole buffer before use, on the sending and on the
	// receiving side, so a 64 KiB chunk cost clearing 1 MiB twice (16
	// times its bytes), and every chunk costs a lease check, a log write
	// and a handful of allocations. A chunk is only as big as the bytes
	// waiting when it is read, so slow output still goes out at once.
	DefaultChunkSize     = 1<<20 - 16<<10
	DefaultMaxChunks     = 1024
	DefaultFlushInterval = 500 * time.Millisecond
	// MaxChunkSize is the largest chunk the controller accepts (its log
	// book refuses larger ones as invalid); ChunkSize is held to it.
	MaxChunkSize = 1 << 20
)

// chunkSize is the chunk size to use for a configured one.
func chunkSize(configured int) int {
	switch {
	case configured <= 0:
		return DefaultChunkSize
	case configured > MaxChunkSize:
		return MaxChunkSize
	}
	return configured
}

// Uploader sends a Buffer's bytes as LogChunks of one stream under one lease.
type Uploader struct {
	Client     Client
	LeaseToken string
	MessageID  string
	Attempt    int32
	// Stream is the log's name ("routine", "hook", "router").
	Stream string
	Buffer *Buffer
	Logger *slog.Logger
	// Backoff spaces retries after failed uploads.
	Backoff backoff.Policy

	// ChunkSize is the largest chunk (DefaultChunkSize when zero, at most
	// MaxChunkSize).
	ChunkSize int
	// BatchBytes closes an UploadLogs stream (to learn the acknowledged
	// offset) once this many bytes were sent on it; half the buffer when zero.
	BatchBytes int
	// MaxChunks closes a stream after this many chunks (DefaultMaxChunks).
	MaxChunks int
	// FlushInterval closes a stream that has unacknowledged bytes and no new
	// data for this long (DefaultFlushInterval).
	FlushInterval time.Duration

	// Stats, readable after Run returns.
	Streams int // UploadLogs calls made
	Retries int // failed calls retried

	buf     []byte      // a chunk's bytes, read from the Buffer
	pending []sentChunk // sent, not acknowledged, contiguous from Buffer.Acked()
	nextSeq uint64      // sequence number of the next new chunk
}

// sentChunk is a chunk sent but not yet acknowledged. A resend repeats it
// exactly (same offset, length and sequence number), so the controller sees
// the same chunks whatever the connection did.
type sentChunk struct {
	off, seq uint64
	n        int
}

// Permanent reports whether an UploadLogs or CompleteAssignment error is not
// worth retrying: the lease is gone, the request was refused as invalid, or
// the worker is not allowed. Everything else (unavailable, deadline, reset
// connections) is retried.
func Permanent(err error) bool {
	switch status.Code(err) {
	case codes.FailedPrecondition, codes.InvalidArgument, codes.OutOfRange,
		codes.PermissionDenied, codes.Unauthenticated, codes.Unimplemented, codes.NotFound:
		return true
	}
	return false
}

// Run uploads until the Buffer is closed and every byte is acknowledged
// (returning nil), a permanent error occurs, or ctx ends. Transient failures
// are retried with backoff, resending from the acknowledged offset.
func (u *Uploader) Run(ctx context.Context) error {
	chunk := chunkSize(u.ChunkSize)
	batch := u.BatchBytes
	if batch <= 0 {
		// Half the window (its limit, fixed: the ring itself grows
		// under the writer's lock while this runs).
		batch = u.Buffer.limit / 2
		if batch < chunk {
			batch = chunk
		}
	}
	maxChunks := u.MaxChunks
	if maxChunks <= 0 {
		maxChunks = DefaultMaxChunks
	}
	flush := u.FlushInterval
	if flush <= 0 {
		flush = DefaultFlushInterval
	}
	log := u.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	// The chunk buffer starts small (most attempts print little) and
	// doubles, up to chunk, while reads fill it.
	u.buf = make([]byte, min(chunk, initialRing))
	u.nextSeq = 0
	u.pending = nil
	failures := 0
	for {
		if u.Buffer.done() {
			return nil
		}
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("upload %s log of %s: %w", u.Stream, u.MessageID, err)
		}
		// Nothing written yet beyond what is acknowledged: wait for data
		// before opening a stream.
		if u.Buffer.Size() == u.Buffer.Acked() {
			u.Buffer.waitData(ctx, u.Buffer.Acked(), 0)
			if err := u.abortErr(); err != nil {
				return err
			}
			continue
		}
		stored, err := u.batch(ctx, chunk, batch, maxChunks, flush)
		if err == nil {
			if err = u.Buffer.ack(stored); err != nil {
				u.Buffer.Abort(err)
				return fmt.Errorf("upload %s log of %s: %w", u.Stream, u.MessageID, err)
			}
			u.dropAcked(stored)
			failures = 0
			continue
		}
		if aerr := u.abortErr(); aerr != nil {
			return aerr
		}
		if Permanent(err) || ctx.Err() != nil {
			return fmt.Errorf("upload %s log of %s: %w", u.Stream, u.MessageID, err)
		}
		u.Retries++
		log.Warn("log upload failed; will resend from the acknowledged offset",
			"message", u.MessageID, "stream", u.Stream, "acked", u.Buffer.Acked(), "err", err)
		if err := u.Backoff.Sleep(ctx, failures); err != nil {
			return fmt.Errorf("upload %s log of %s: %w", u.Stream, u.MessageID, err)
		}
		failures++
	}
}

func (u *Uploader) abortErr() error {
	u.Buffer.mu.Lock()
	defer u.Buffer.mu.Unlock()
	return u.Buffer.abortE
}

// dropAcked forgets the pending chunks wholly before stored.
func (u *Uploader) dropAcked(stored uint64) {
	i := 0
	for i < len(u.pending) && u.pending[i].off+uint64(u.pending[i].n) <= stored {
		i++
	}
	u.pending = append(u.pending[:0], u.pending[i:]...)
}

// batch opens one UploadLogs stream, resends the pending chunks exactly,
// sends new chunks, closes the stream and returns the stored offset.
func (u *Uploader) batch(ctx context.Context, chunk, batch, maxChunks int, flush time.Duration) (uint64, error) {
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := u.Client.UploadLogs(sctx)
	if err != nil {
		return 0, err
	}
	u.Streams++
	pos := u.Buffer.Acked()
	if len(u.pending) > 0 {
		pos = u.pending[0].off
	}
	bytes, chunks := 0, 0
	for bytes < batch && chunks < maxChunks {
		var c sentChunk
		buf := u.buf
		if chunks < len(u.pending) {
			c = u.pending[chunks]
			n, _, err := u.Buffer.readAt(c.off, buf[:c.n])
			if err != nil {
				return 0, err
			}
			if n != c.n {
				return 0, fmt.Errorf("logship: resend of %d bytes at %d found only %d", c.n, c.off, n)
			}
		} else {
			n, closed, err := u.Buffer.readAt(pos, buf)
			if err != nil {
				return 0, err
			}
			if n == 0 {
				if closed {
					break
				}
				if u.Buffer.waitData(ctx, pos, flush) {
					break // idle: close to learn the acknowledged offset
				}
				if ctx.Err() != nil {
					return 0, ctx.Err()
				}
				continue
			}
			c = sentChunk{off: pos, seq: u.nextSeq, n: n}
		}
		req := &decreev1.UploadLogsRequest{
			LeaseToken: u.LeaseToken,
			Chunk: &decreev1.LogChunk{
				MessageId: u.MessageID,
				Attempt:   u.Attempt,
				Stream:    u.Stream,
				Sequence:  c.seq,
				Offset:    c.off,
				Data:      buf[:c.n],
			},
		}
		if err := stream.Send(req); err != nil {
			if errors.Is(err, io.EOF) {
				// The server ended the stream; its status says why.
				_, err = stream.CloseAndRecv()
				if err == nil {
					err = status.Error(codes.Internal, "controller closed the log stream early without an error")
				}
			}
			return 0, err
		}
		if chunks >= len(u.pending) {
			u.pending = append(u.pending, c)
			u.nextSeq++
			if c.n == len(u.buf) && len(u.buf) < chunk {
				// Sent (gRPC encodes the message in Send): a
				// full read asks for a bigger buffer.
				u.buf = make([]byte, min(2*len(u.buf), chunk))
			}
		}
		chunks++
		pos = c.off + uint64(c.n)
		bytes += c.n
	}
	resp, err := stream.CloseAndRecv()
	if err != nil {
		return 0, err
	}
	stored, ok := resp.GetStoredOffsets()[u.Stream]
	if !ok {
		if chunks == 0 {
			return u.Buffer.Acked(), nil
		}
		return 0, status.Errorf(codes.Internal, "controller answered UploadLogs without a stored offset for stream %q", u.Stream)
	}
	return stored, nil
}
