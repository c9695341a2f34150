package logship

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"testing"
	"time"
)

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestWriteBlocksUntilAcknowledged(t *testing.T) {
	b := NewBuffer(8)
	done := make(chan error, 1)
	go func() {
		_, err := b.Write([]byte("0123456789abcdefghij"))
		done <- err
	}()
	waitFor(t, "8 bytes buffered", func() bool { return b.Size() == 8 })
	select {
	case err := <-done:
		t.Fatalf("Write of 20 bytes returned (%v) with only 8 bytes of room and nothing acknowledged", err)
	default:
	}
	if err := b.ack(5); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "13 bytes written", func() bool { return b.Size() == 13 })
	got := make([]byte, 16)
	n, closed, err := b.readAt(5, got)
	if err != nil || closed || string(got[:n]) != "56789abc" {
		t.Fatalf("readAt(5) = %q, %v, %v; want the unacknowledged bytes across the ring's end", got[:n], closed, err)
	}
	if err := b.ack(13); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "20 bytes written", func() bool { return b.Size() == 20 })
	if err := <-done; err != nil {
		t.Fatalf("Write = %v", err)
	}
}

func TestAckOutsideWindowIsAnError(t *testing.T) {
	b := NewBuffer(8)
	b.Write([]byte("abcd"))
	if err := b.ack(5); err == nil {
		t.Error("ack beyond the written bytes succeeded")
	}
	if err := b.ack(3); err != nil {
		t.Fatal(err)
	}
	if err := b.ack(2); err == nil {
		t.Error("ack below the acknowledged offset (lost bytes) succeeded")
	}
	if _, _, err := b.readAt(1, make([]byte, 4)); err == nil {
		t.Error("readAt below the acknowledged offset succeeded")
	}
}

func TestAbortUnblocksWriter(t *testing.T) {
	b := NewBuffer(4)
	done := make(chan error, 1)
	go func() {
		_, err := b.Write([]byte("too long for the window"))
		done <- err
	}()
	waitFor(t, "window full", func() bool { return b.Size() == 4 })
	cause := errors.New("lease lost")
	b.Abort(cause)
	select {
	case err := <-done:
		if !errors.Is(err, cause) {
			t.Errorf("Write after Abort = %v, want %v", err, cause)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Abort did not unblock the writer")
	}
	if _, err := b.Write([]byte("x")); !errors.Is(err, cause) {
		t.Errorf("later Write = %v, want %v", err, cause)
	}
}

func TestWriteAfterClose(t *testing.T) {
	b := NewBuffer(4)
	b.Close()
	if _, err := b.Write([]byte("x")); !errors.Is(err, ErrClosed) {
		t.Errorf("Write after Close = %v, want ErrClosed", err)
	}
	if !b.done() {
		t.Error("an empty closed buffer is not done")
	}
}

// A reader that reads and acknowledges in random steps sees exactly the
// bytes written in random steps, across many wraps of the ring, with a
// ring at its limit from the start and with one that grows (from
// initialRing, doubling while unacknowledged bytes wait) while wrapped.
func TestRingKeepsBytesExact(t *testing.T) {
	for _, tc := range []struct {
		name         string
		limit, write int
		grows        bool
	}{
		{"fixed", 4093, 9000, false},
		{"growing", 1<<20 + 7, 200_000, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(1, 2))
			want := make([]byte, 4<<20)
			for i := range want {
				want[i] = byte(r.Uint32())
			}
			b := NewBuffer(tc.limit)
			go func() {
				for p := want; len(p) > 0; {
					k := min(len(p), 1+r.IntN(tc.write))
					if _, err := b.Write(p[:k]); err != nil {
						t.Error(err)
						return
					}
					p = p[k:]
				}
				b.Close()
			}()
			var got bytes.Buffer
			buf := make([]byte, 3000)
			rr := rand.New(rand.NewPCG(3, 4))
			maxRing := 0
			for !b.done() {
				off := b.Acked()
				b.waitData(context.Background(), off, 0)
				n, _, err := b.readAt(off, buf[:1+rr.IntN(len(buf)-1)])
				if err != nil {
					t.Fatal(err)
				}
				got.Write(buf[:n])
				if err := b.ack(off + uint64(n)); err != nil {
					t.Fatal(err)
				}
				b.mu.Lock()
				maxRing = max(maxRing, len(b.ring))
				b.mu.Unlock()
			}
			if !bytes.Equal(got.Bytes(), want) {
				t.Fatalf("read %d bytes that differ from the %d written", got.Len(), len(want))
			}
			if maxRing > tc.limit {
				t.Errorf("ring grew to %d bytes, over the limit %d", maxRing, tc.limit)
			}
			if tc.grows != (maxRing > initialRing) {
				t.Errorf("ring reached %d bytes (initial %d); growth expected: %v", maxRing, initialRing, tc.grows)
			}
		})
	}
}

// The ring grows while the bytes waiting in it wrap around its end: they
// keep their offsets in the larger ring.
func TestRingGrowsWhileWrapped(t *testing.T) {
	b := NewBuffer(1 << 20)
	var want bytes.Buffer
	var got bytes.Buffer
	buf := make([]byte, 1<<20)
	write := func(n int) {
		p := make([]byte, n)
		for i := range p {
			p[i] = byte(want.Len() + i*7)
		}
		want.Write(p)
		if _, err := b.Write(p); err != nil {
			t.Fatal(err)
		}
	}
	drain := func() {
		off := b.Acked()
		n, _, err := b.readAt(off, buf)
		if err != nil {
			t.Fatal(err)
		}
		got.Write(buf[:n])
		if err := b.ack(off + uint64(n)); err != nil {
			t.Fatal(err)
		}
	}
	write(50_000)
	drain()
	write(50_000)
	drain()       // base = 100,000: past the end of the first ring
	write(60_000) // wraps around the 64 KiB ring
	if len(b.ring) != initialRing {
		t.Fatalf("ring %d bytes before the burst, want %d", len(b.ring), initialRing)
	}
	write(100_000) // does not fit: the ring grows with wrapped bytes in it
	if len(b.ring) <= initialRing {
		t.Fatalf("ring did not grow (%d bytes)", len(b.ring))
	}
	drain()
	if !bytes.Equal(got.Bytes(), want.Bytes()) {
		t.Fatalf("read %d bytes that differ from the %d written", got.Len(), want.Len())
	}
}

func TestChunkSizeWithinTheControllersLimit(t *testing.T) {
	for _, tc := range []struct{ in, want int }{{0, DefaultChunkSize}, {4096, 4096}, {32 << 20, MaxChunkSize}} {
		if got := chunkSize(tc.in); got != tc.want {
			t.Errorf("chunkSize(%d) = %d, want %d", tc.in, got, tc.want)
		}
	}
}
