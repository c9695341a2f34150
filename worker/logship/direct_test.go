package logship

import (
	"bytes"
	"context"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	decreev1 "github.com/decreehq/decree/proto/decree/v1"
	"github.com/decreehq/decree/worker/backoff"
	"github.com/decreehq/decree/worker/logship/logshiptest"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func randomBytes(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, seed+1))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// writeAll writes want in random pieces (some over the chunk size) and
// closes d.
func writeAll(t *testing.T, d *Direct, want []byte) error {
	t.Helper()
	r := rand.New(rand.NewPCG(7, 8))
	for p := want; len(p) > 0; {
		k := min(len(p), 1+r.IntN(3*d.ChunkSize))
		n, err := d.Write(p[:k])
		if err != nil {
			return err
		}
		if n != k {
			t.Fatalf("Write of %d bytes returned %d", k, n)
		}
		p = p[k:]
	}
	return d.Close()
}

// checkChunks verifies that the store's chunks carry want once, in order,
// at contiguous offsets with consecutive sequence numbers, none over size.
func checkChunks(t *testing.T, chunks []*decreev1.LogChunk, want []byte, size int) {
	t.Helper()
	var off uint64
	for i, c := range chunks {
		if c.GetSequence() != uint64(i) || c.GetOffset() != off {
			t.Fatalf("chunk %d: sequence %d at offset %d; want sequence %d at offset %d", i, c.GetSequence(), c.GetOffset(), i, off)
		}
		if len(c.GetData()) > size {
			t.Fatalf("chunk %d holds %d bytes, over the chunk size %d", i, len(c.GetData()), size)
		}
		end := off + uint64(len(c.GetData()))
		if !bytes.Equal(c.GetData(), want[off:end]) {
			t.Fatalf("chunk %d at %d carries other bytes than were written there", i, off)
		}
		off = end
	}
	if off != uint64(len(want)) {
		t.Fatalf("chunks cover %d bytes, want %d", off, len(want))
	}
}

// Every Write is stored before it returns, split into chunks of at most
// the chunk size with consecutive sequence numbers and contiguous offsets;
// Close finds every byte stored.
func TestDirectStoresEachWrite(t *testing.T) {
	want := randomBytes(3<<20+12345, 1)
	store := &logshiptest.Store{}
	d := &Direct{Client: store, LeaseToken: "t", MessageID: "m", Attempt: 1, Stream: "routine", ChunkSize: 100 << 10}
	if _, err := d.Write(want[:10]); err != nil {
		t.Fatal(err)
	}
	if got := store.Log(); !bytes.Equal(got, want[:10]) {
		t.Fatalf("after the first Write the store holds %q, want the 10 bytes written", got)
	}
	if err := writeAll(t, d, want[10:]); err != nil {
		t.Fatal(err)
	}
	if got := store.Log(); !bytes.Equal(got, want) {
		t.Fatalf("stored %d bytes that differ from the %d written", len(got), len(want))
	}
	checkChunks(t, store.Chunks(), want, 100<<10)
	if d.Size() != uint64(len(want)) || store.Calls() != 1 {
		t.Errorf("Size %d, calls %d; want %d bytes in one call", d.Size(), store.Calls(), len(want))
	}
	if _, err := d.Write([]byte("late")); err != ErrClosed {
		t.Errorf("Write after Close = %v, want ErrClosed", err)
	}
}

// A call that fails (a dropped connection: UNAVAILABLE) is retried with
// backoff in a new call from the stored offset: the log ends exact, the
// writer having waited instead of losing bytes.
func TestDirectRetriesFailedCalls(t *testing.T) {
	want := randomBytes(2<<20, 2)
	var n atomic.Int64
	store := &logshiptest.Store{Refuse: func(*decreev1.LogChunk) error {
		if n.Add(1)%5 == 0 {
			return status.Error(codes.Unavailable, "connection reset")
		}
		return nil
	}}
	d := &Direct{Client: store, LeaseToken: "t", MessageID: "m", Attempt: 1, Stream: "routine", ChunkSize: 64 << 10,
		Backoff: backoff.Policy{Min: time.Millisecond, Max: 5 * time.Millisecond}}
	if err := writeAll(t, d, want); err != nil {
		t.Fatal(err)
	}
	if got := store.Log(); !bytes.Equal(got, want) {
		t.Fatalf("stored %d bytes that differ from the %d written", len(got), len(want))
	}
	checkChunks(t, store.Chunks(), want, 64<<10)
	if d.Retries == 0 || store.Calls() < 2 {
		t.Errorf("retries %d, calls %d: the failures were not retried in new calls", d.Retries, store.Calls())
	}
}

// A refusal (the lease ended: FAILED_PRECONDITION) is not retried: the
// Write fails with it at once, and so does every later Write and Close.
func TestDirectRefusalEndsTheStream(t *testing.T) {
	store := &logshiptest.Store{Refuse: func(c *decreev1.LogChunk) error {
		if c.GetOffset() > 0 {
			return status.Error(codes.FailedPrecondition, "lease ended")
		}
		return nil
	}}
	d := &Direct{Client: store, LeaseToken: "t", MessageID: "m", Attempt: 1, Stream: "routine",
		Backoff: backoff.Policy{Min: time.Hour, Max: time.Hour}, Ctx: context.Background()}
	if _, err := d.Write([]byte("first\n")); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, err := d.Write([]byte("second\n")); done <- err }()
	select {
	case err := <-done:
		if status.Code(err) != codes.FailedPrecondition || !Permanent(err) {
			t.Fatalf("Write after the refusal = %v, want the FAILED_PRECONDITION", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a refused Write was retried (it waited for the hour-long backoff)")
	}
	if _, err := d.Write([]byte("third\n")); status.Code(err) != codes.FailedPrecondition {
		t.Errorf("later Write = %v, want the refusal again", err)
	}
	if err := d.Close(); status.Code(err) != codes.FailedPrecondition {
		t.Errorf("Close = %v, want the refusal", err)
	}
	if got := string(store.Log()); got != "first\n" {
		t.Errorf("stored %q, want only the bytes before the refusal", got)
	}
}
