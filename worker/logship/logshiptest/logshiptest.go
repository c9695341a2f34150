// Package logshiptest is an in-memory stand-in for a controller's
// UploadLogs, for tests of log shipping: a Store keeps one log as the
// controller's log book does (bytes already stored are skipped by offset, a
// chunk leaving a gap is refused with OUT_OF_RANGE), optionally taking a
// while per chunk, and records every chunk it got.
package logshiptest

import (
	"bytes"
	"context"
	"io"
	"sync"
	"time"

	"github.com/decreehq/decree/pkg/inproc"
	decreev1 "github.com/decreehq/decree/proto/decree/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Store is a logship.Client holding one log in memory. The zero value is
// ready to use.
type Store struct {
	// Delay is how long storing each chunk takes (a busy controller).
	Delay time.Duration
	// Stored, when set, is poked (without blocking) after every chunk.
	Stored chan struct{}
	// Refuse, when set, is asked before each chunk is stored: an error
	// ends the call with it (a gRPC status error keeps its code), as a
	// dropped connection (UNAVAILABLE) or a lost lease
	// (FAILED_PRECONDITION) would.
	Refuse func(*decreev1.LogChunk) error

	mu     sync.Mutex
	log    bytes.Buffer
	chunks []*decreev1.LogChunk
	calls  int
}

// UploadLogs opens a call; it implements logship.Client.
func (s *Store) UploadLogs(ctx context.Context, _ ...grpc.CallOption) (grpc.ClientStreamingClient[decreev1.UploadLogsRequest, decreev1.UploadLogsResponse], error) {
	s.mu.Lock()
	s.calls++
	s.mu.Unlock()
	c := &call{s: s, stored: map[string]uint64{}}
	return &inproc.ClientStream[decreev1.UploadLogsRequest, decreev1.UploadLogsResponse]{Ctx: ctx, SendFunc: c.Send, CloseFunc: c.CloseAndRecv}, nil
}

// Log returns a copy of the bytes stored.
func (s *Store) Log() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return bytes.Clone(s.log.Bytes())
}

// Chunks returns the chunks received, in order (their data copied).
func (s *Store) Chunks() []*decreev1.LogChunk {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*decreev1.LogChunk(nil), s.chunks...)
}

// Calls returns how many UploadLogs calls were opened.
func (s *Store) Calls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls
}

type call struct {
	s      *Store
	stored map[string]uint64
	err    error
}

func (c *call) Send(req *decreev1.UploadLogsRequest) error {
	if c.err != nil {
		return io.EOF
	}
	time.Sleep(c.s.Delay)
	ch := req.GetChunk()
	s := c.s
	if s.Refuse != nil {
		if err := s.Refuse(ch); err != nil {
			c.err = err
			return io.EOF
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	have := uint64(s.log.Len())
	if ch.GetOffset() > have {
		c.err = status.Errorf(codes.OutOfRange, "chunk at %d but %d bytes stored; resend from offset %d", ch.GetOffset(), have, have)
		return io.EOF
	}
	if end := ch.GetOffset() + uint64(len(ch.GetData())); end > have {
		s.log.Write(ch.GetData()[have-ch.GetOffset():])
	}
	s.chunks = append(s.chunks, &decreev1.LogChunk{MessageId: ch.GetMessageId(), Attempt: ch.GetAttempt(), Stream: ch.GetStream(),
		Sequence: ch.GetSequence(), Offset: ch.GetOffset(), Data: bytes.Clone(ch.GetData())})
	c.stored[ch.GetStream()] = uint64(s.log.Len())
	if s.Stored != nil {
		select {
		case s.Stored <- struct{}{}:
		default:
		}
	}
	return nil
}

func (c *call) CloseAndRecv() (*decreev1.UploadLogsResponse, error) {
	if c.err != nil {
		return nil, c.err
	}
	return &decreev1.UploadLogsResponse{StoredOffsets: c.stored}, nil
}
