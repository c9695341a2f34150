// Package logship carries one log stream of one assignment from a running
// process to the controller's WorkerService.UploadLogs, with flow control.
//
// A Buffer is the bounded window between the process and the network: Write
// blocks while the window holds Limit bytes the controller has not
// acknowledged yet, so a routine that prints a gigabyte is slowed down to the
// speed of the upload instead of growing anyone's memory (the kernel pipe
// fills and the process blocks in write). Bytes stay in the window until the
// controller acknowledges them, so after a dropped connection the Uploader
// resends exactly from the acknowledged offset: nothing is lost, and the
// controller skips by offset whatever it already had, so nothing is stored
// twice.
//
// UploadLogs is a client stream with one answer at its end, so the Uploader
// sends a batch of chunks, closes the stream to learn the stored offset,
// releases that much of the window and opens the next stream.
package logship

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// ErrClosed is returned by Write after Close.
var ErrClosed = errors.New("log stream already closed")

// Buffer is a bounded ring of log bytes not yet acknowledged by the
// controller. It expects one writer (the process's output) and one reader
// (the Uploader).
type Buffer struct {
	mu      sync.Mutex
	ring    []byte // grows by doubling up to limit as bytes wait
	limit   int
	base    uint64 // offset of the oldest byte kept (= acknowledged offset)
	end     uint64 // offset just after the newest byte written
	closed  bool
	abortCh chan struct{}
	abortE  error
	space   chan struct{} // poked when acknowledged bytes free room
	data    chan struct{} // poked when bytes arrive or the buffer closes
}

// NewBuffer returns a Buffer that holds at most limit unacknowledged bytes.
func NewBuffer(limit int) *Buffer {
	if limit <= 0 {
		panic("logship: buffer limit must be positive")
	}
	return &Buffer{
		// Most attempts print little: the ring starts small and grows
		// only while unacknowledged bytes fill it (an attempt does not
		// pay for zeroing megabytes it never uses).
		ring:    make([]byte, min(limit, initialRing)),
		limit:   limit,
		abortCh: make(chan struct{}),
		space:   make(chan struct{}, 1),
		data:    make(chan struct{}, 1),
	}
}

func poke(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// Write appends p, blocking while the window is full. It returns early with
// the abort error if the stream is aborted.
func (b *Buffer) Write(p []byte) (int, error) {
	n := 0
	for len(p) > 0 {
		b.mu.Lock()
		if b.abortE != nil {
			err := b.abortE
			b.mu.Unlock()
			return n, err
		}
		if b.closed {
			b.mu.Unlock()
			return n, ErrClosed
		}
		if b.end-b.base+uint64(len(p)) > uint64(len(b.ring)) && len(b.ring) < b.limit {
			b.growLocked()
		}
		size := uint64(len(b.ring))
		free := size - (b.end - b.base)
		if free == 0 {
			b.mu.Unlock()
			select {
			case <-b.space:
			case <-b.abortCh:
			}
			continue
		}
		k := uint64(len(p))
		if k > free {
			k = free
		}
		start := b.end % size
		c := copy(b.ring[start:], p[:k])
		copy(b.ring, p[c:k])
		b.end += k
		b.mu.Unlock()
		poke(b.data)
		p = p[k:]
		n += int(k)
	}
	return n, nil
}

// initialRing is the ring's first size.
const initialRing = 64 << 10

// growLocked doubles the ring (at most to the limit), keeping the bytes
// between base and end at their offsets.
func (b *Buffer) growLocked() {
	old := b.ring
	size := uint64(len(old))
	ring := make([]byte, min(2*len(old), b.limit))
	nsize := uint64(len(ring))
	for off := b.base; off < b.end; {
		src := old[off%size:]
		if rem := b.end - off; uint64(len(src)) > rem {
			src = src[:rem]
		}
		dst := ring[off%nsize:]
		n := copy(dst, src)
		off += uint64(n)
	}
	b.ring = ring
}

// Close marks the end of the stream; the Uploader finishes once everything
// written has been acknowledged.
func (b *Buffer) Close() error {
	b.mu.Lock()
	b.closed = true
	b.mu.Unlock()
	poke(b.data)
	return nil
}

// Abort discards the stream: blocked and later writes fail with err (the
// process's output goes nowhere), and the Uploader stops.
func (b *Buffer) Abort(err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.abortE != nil {
		return
	}
	if err == nil {
		err = errors.New("log stream aborted")
	}
	b.abortE = err
	close(b.abortCh)
}

// Size is the number of bytes written so far.
func (b *Buffer) Size() uint64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.end
}

// Acked is the offset the controller has acknowledged.
func (b *Buffer) Acked() uint64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.base
}

// readAt copies bytes from offset off (>= the acknowledged offset) into dst.
// It reports how many it copied, and whether the stream is closed.
func (b *Buffer) readAt(off uint64, dst []byte) (int, bool, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.abortE != nil {
		return 0, b.closed, b.abortE
	}
	if off < b.base || off > b.end {
		return 0, b.closed, fmt.Errorf("logship: read at offset %d outside the window [%d, %d]", off, b.base, b.end)
	}
	avail := b.end - off
	if uint64(len(dst)) < avail {
		avail = uint64(len(dst))
	}
	size := uint64(len(b.ring))
	start := off % size
	c := copy(dst[:avail], b.ring[start:])
	copy(dst[c:avail], b.ring)
	return int(avail), b.closed, nil
}

// ack releases everything before off.
func (b *Buffer) ack(off uint64) error {
	b.mu.Lock()
	if off > b.end {
		b.mu.Unlock()
		return fmt.Errorf("controller acknowledged %d bytes but only %d were written", off, b.end)
	}
	if off < b.base {
		base := b.base
		b.mu.Unlock()
		return fmt.Errorf("controller holds %d bytes but had acknowledged %d before; the bytes in between are no longer available to resend", off, base)
	}
	b.base = off
	b.mu.Unlock()
	poke(b.space)
	return nil
}

// done reports whether everything written was acknowledged after Close.
func (b *Buffer) done() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.closed && b.base == b.end
}

// waitData waits until bytes beyond off exist, the stream closes or aborts,
// ctx ends, or the timeout (if positive) passes. It reports whether it timed
// out.
func (b *Buffer) waitData(ctx context.Context, off uint64, timeout time.Duration) (timedOut bool) {
	var tc <-chan time.Time
	if timeout > 0 {
		t := time.NewTimer(timeout)
		defer t.Stop()
		tc = t.C
	}
	for {
		b.mu.Lock()
		ready := b.end > off || b.closed || b.abortE != nil
		b.mu.Unlock()
		if ready {
			return false
		}
		select {
		case <-b.data:
		case <-b.abortCh:
		case <-ctx.Done():
			return false
		case <-tc:
			return true
		}
	}
}
