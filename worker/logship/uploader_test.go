package logship

import (
	"bytes"
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/decreehq/decree/worker/logship/logshiptest"
)

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
	store := &logshiptest.Store{Delay: 5 * time.Millisecond}
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
	if got := store.Log(); !bytes.Equal(got, want) {
		t.Fatalf("stored %d bytes that differ from the %d written", len(got), len(want))
	}
	var off uint64
	largest := 0
	chunks := store.Chunks()
	for i, c := range chunks {
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
	if len(chunks) > 64 {
		t.Errorf("%d chunks for 6 MiB: not coalesced", len(chunks))
	}
}

// Coalescing never holds bytes back: a line written while the uploader is
// idle goes out at once, alone, without waiting for more to fill a chunk.
func TestIdleLineIsSentAtOnce(t *testing.T) {
	store := &logshiptest.Store{Stored: make(chan struct{}, 1)}
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
		case <-store.Stored:
		case <-time.After(5 * time.Second):
			t.Fatalf("line %d not sent within 5 s", i+1)
		}
		if d := time.Since(start); d > 200*time.Millisecond {
			t.Errorf("line %d took %v to be sent", i+1, d)
		}
	}
	if got := string(store.Log()); got != "first line\nsecond line\n" {
		t.Fatalf("stored %q", got)
	}
}
