package logship

import (
	"bytes"
	"context"
	"io"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	decreev1 "github.com/decreehq/decree/proto/decree/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// slowStore is a Client whose every chunk takes delay to store, as a busy
// controller or disk would: it keeps the chunks it got and the log they
// make, refusing gaps as the controller does.
type slowStore struct {
	delay time.Duration

	mu     sync.Mutex
	chunks []*decreev1.LogChunk // copies, in arrival order
	log    bytes.Buffer
	sent   chan struct{} // poked at every stored chunk
}

func (s *slowStore) UploadLogs(ctx context.Context, _ ...grpc.CallOption) (grpc.ClientStreamingClient[decreev1.UploadLogsRequest, decreev1.UploadLogsResponse], error) {
	return &slowUpload{s: s, ctx: ctx}, nil
}

type slowUpload struct {
	grpc.ClientStream
	s   *slowStore
	ctx context.Context
	err error
}

func (u *slowUpload) Send(req *decreev1.UploadLogsRequest) error {
	if u.err != nil {
		return io.EOF
	}
	time.Sleep(u.s.delay)
	c := req.GetChunk()
	u.s.mu.Lock()
	defer u.s.mu.Unlock()
	if c.GetOffset() > uint64(u.s.log.Len()) {
		u.err = status.Errorf(codes.OutOfRange, "gap at %d", c.GetOffset())
		return io.EOF
	}
	if end := c.GetOffset() + uint64(len(c.GetData())); end > uint64(u.s.log.Len()) {
		u.s.log.Write(c.GetData()[uint64(u.s.log.Len())-c.GetOffset():])
	}
	cp := &decreev1.LogChunk{Sequence: c.GetSequence(), Offset: c.GetOffset(), Data: bytes.Clone(c.GetData())}
	u.s.chunks = append(u.s.chunks, cp)
	if u.s.sent != nil {
		select {
		case u.s.sent <- struct{}{}:
		default:
		}
	}
	return nil
}

func (u *slowUpload) CloseAndRecv() (*decreev1.UploadLogsResponse, error) {
	if u.err != nil {
		return nil, u.err
	}
	u.s.mu.Lock()
	defer u.s.mu.Unlock()
	return &decreev1.UploadLogsResponse{StoredOffsets: map[string]uint64{"routine": uint64(u.s.log.Len())}}, nil
}

func (u *slowUpload) Header() (metadata.MD, error) { return nil, nil }
func (u *slowUpload) Trailer() metadata.MD         { return nil }
func (u *slowUpload) CloseSend() error             { return nil }
func (u *slowUpload) Context() context.Context     { return u.ctx }

// While the store is slow, the bytes written meanwhile wait in the window
// and go out as one chunk per read of up to ChunkSize: many small writes
// make few large chunks (fewer calls, fewer writes, fewer buffers on both
// sides), and the chunks still carry every byte once, in order, at
// contiguous offsets with consecutive sequence numbers.
func TestSlowStoreGetsCoalescedChunksInOrder(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	want := make([]byte, 6<<20)
	for i := range want {
		want[i] = byte(r.Uint32())
	}
	store := &slowStore{delay: 5 * time.Millisecond}
	buf := NewBuffer(4 << 20)
	up := &Uploader{Client: store, LeaseToken: "t", MessageID: "m", Attempt: 1, Stream: "routine", Buffer: buf}
	done := make(chan error, 1)
	go func() { done <- up.Run(context.Background()) }()
	for p := want; len(p) > 0; {
		k := min(len(p), 1+r.IntN(4096)) // line-sized writes, as a routine's
		if _, err := buf.Write(p[:k]); err != nil {
			t.Fatal(err)
		}
		p = p[k:]
	}
	buf.Close()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("upload did not finish")
	}
	store.mu.Lock()
	defer store.mu.Unlock()
	if !bytes.Equal(store.log.Bytes(), want) {
		t.Fatalf("stored %d bytes that differ from the %d written", store.log.Len(), len(want))
	}
	var off uint64
	largest := 0
	for i, c := range store.chunks {
		if c.GetSequence() != uint64(i) || c.GetOffset() != off {
			t.Fatalf("chunk %d: sequence %d at offset %d; want sequence %d at offset %d", i, c.GetSequence(), c.GetOffset(), i, off)
		}
		if !bytes.Equal(c.GetData(), want[off:off+uint64(len(c.GetData()))]) {
			t.Fatalf("chunk %d at offset %d carries other bytes than were written there", i, off)
		}
		if len(c.GetData()) > DefaultChunkSize {
			t.Fatalf("chunk %d holds %d bytes, over the chunk size %d", i, len(c.GetData()), DefaultChunkSize)
		}
		off += uint64(len(c.GetData()))
		largest = max(largest, len(c.GetData()))
	}
	// 6 MiB behind a store taking 5 ms a chunk: bytes wait, and a chunk
	// takes all that waits (up to the chunk size), not 64 KiB at a time.
	if largest <= 256<<10 {
		t.Errorf("largest chunk %d bytes: the bytes waiting behind the slow store were not sent together", largest)
	}
	if len(store.chunks) > 64 {
		t.Errorf("%d chunks for 6 MiB: not coalesced", len(store.chunks))
	}
}

// Coalescing never holds bytes back: a line written while the uploader is
// idle goes out at once, alone, without waiting for more to fill a chunk.
func TestIdleLineIsSentAtOnce(t *testing.T) {
	store := &slowStore{sent: make(chan struct{}, 1)}
	buf := NewBuffer(4 << 20)
	up := &Uploader{Client: store, LeaseToken: "t", MessageID: "m", Attempt: 1, Stream: "routine", Buffer: buf, FlushInterval: time.Hour}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- up.Run(ctx) }()
	defer func() { cancel(); <-done }()
	for i, line := range []string{"first line\n", "second line\n"} {
		start := time.Now()
		if _, err := buf.Write([]byte(line)); err != nil {
			t.Fatal(err)
		}
		select {
		case <-store.sent:
		case <-time.After(5 * time.Second):
			t.Fatalf("line %d not sent within 5 s", i+1)
		}
		if d := time.Since(start); d > 200*time.Millisecond {
			t.Errorf("line %d took %v to be sent", i+1, d)
		}
	}
	store.mu.Lock()
	defer store.mu.Unlock()
	if got := store.log.String(); got != "first line\nsecond line\n" {
		t.Fatalf("stored %q", got)
	}
}
