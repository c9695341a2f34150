// Package logbook stores attempt logs that workers upload in chunks and lets
// clients follow them live.
//
// Appends are idempotent by byte offset: bytes already stored are skipped,
// so a worker that reconnects may resend from its last acknowledged offset;
// a chunk that would leave a hole is refused with a *GapError naming the
// offset to resend from. Memory stays bounded whatever a routine prints:
// chunks go straight to the file, and followers read the file.
package logbook

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"sync"
)

// Key names one log: a stream of one attempt of one message.
type Key struct {
	MessageID string
	Attempt   int
	Stream    string
}

func (k Key) String() string {
	return fmt.Sprintf("%s attempt %d stream %s", k.MessageID, k.Attempt, k.Stream)
}

type attemptKey struct {
	id      string
	attempt int
}

// GapError refuses a chunk that starts after the bytes stored so far.
type GapError struct {
	Key    Key
	Offset uint64 // where the chunk starts
	Stored uint64 // bytes stored; resend from here
}

func (e *GapError) Error() string {
	return fmt.Sprintf("log %s: chunk starts at byte %d but only %d bytes are stored; resend from offset %d", e.Key, e.Offset, e.Stored, e.Stored)
}

// PathFunc maps a key to its file; it must validate the key's parts.
type PathFunc func(Key) (string, error)

// ReadChunk is how many bytes a follower reads at a time.
const ReadChunk = 64 << 10

// Book is a set of logs. It is safe for concurrent use.
type Book struct {
	pathFor PathFunc

	mu    sync.Mutex
	files map[Key]*logFile
	live  map[attemptKey]*liveAttempt
}

type logFile struct {
	f    *os.File
	size uint64
}

type liveAttempt struct {
	refs    int
	changed chan struct{} // closed and replaced on every append and at the end
}

// New returns a book storing logs where pathFor says.
func New(pathFor PathFunc) *Book {
	return &Book{pathFor: pathFor, files: map[Key]*logFile{}, live: map[attemptKey]*liveAttempt{}}
}

// Begin marks an attempt as under way: its followers wait for more bytes
// until End. Calls nest (each Begin needs an End).
func (b *Book) Begin(messageID string, attempt int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	ak := attemptKey{messageID, attempt}
	la := b.live[ak]
	if la == nil {
		la = &liveAttempt{changed: make(chan struct{})}
		b.live[ak] = la
	}
	la.refs++
}

// End marks the attempt as ended (after the last matching Begin): its files
// are synced and closed, and followers finish once they read to the end.
func (b *Book) End(messageID string, attempt int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	ak := attemptKey{messageID, attempt}
	la := b.live[ak]
	if la == nil {
		return
	}
	if la.refs--; la.refs > 0 {
		return
	}
	delete(b.live, ak)
	for k, lf := range b.files {
		if k.MessageID == messageID && k.Attempt == attempt {
			_ = lf.f.Sync()
			_ = lf.f.Close()
			delete(b.files, k)
		}
	}
	close(la.changed)
}

// openLocked returns the open file of k, opening it (and learning its size
// from the disk, so a restarted controller continues where it stopped).
func (b *Book) openLocked(k Key) (*logFile, error) {
	if lf := b.files[k]; lf != nil {
		return lf, nil
	}
	p, err := b.pathFor(k)
	if err != nil {
		return nil, err
	}
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open log %s: %w", k, err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("open log %s: %w", k, err)
	}
	lf := &logFile{f: f, size: uint64(st.Size())}
	b.files[k] = lf
	return lf, nil
}

// Append stores data, which starts at byte offset of the log, and returns
// the bytes stored afterwards. Bytes below the stored size are skipped; a
// chunk starting beyond it is refused with a *GapError.
func (b *Book) Append(k Key, offset uint64, data []byte) (uint64, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	lf, err := b.openLocked(k)
	if err != nil {
		return 0, err
	}
	if offset > lf.size {
		return lf.size, &GapError{Key: k, Offset: offset, Stored: lf.size}
	}
	end := offset + uint64(len(data))
	if end <= lf.size {
		return lf.size, nil
	}
	fresh := data[lf.size-offset:]
	n, err := lf.f.Write(fresh)
	lf.size += uint64(n)
	if err != nil {
		return lf.size, fmt.Errorf("append to log %s: %w", k, err)
	}
	if !b.isLiveLocked(k) {
		// Not under way: nothing else would close it.
		_ = lf.f.Sync()
		_ = lf.f.Close()
		delete(b.files, k)
	}
	b.notifyLocked(k)
	return lf.size, nil
}

// Live reports whether an attempt is under way (its logs may still grow).
func (b *Book) Live(messageID string, attempt int) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.live[attemptKey{messageID, attempt}] != nil
}

func (b *Book) isLiveLocked(k Key) bool { return b.live[attemptKey{k.MessageID, k.Attempt}] != nil }

func (b *Book) notifyLocked(k Key) {
	if la := b.live[attemptKey{k.MessageID, k.Attempt}]; la != nil {
		close(la.changed)
		la.changed = make(chan struct{})
	}
}

// Size returns the bytes stored for k (0 when the log does not exist).
func (b *Book) Size(k Key) (uint64, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if lf := b.files[k]; lf != nil {
		return lf.size, nil
	}
	p, err := b.pathFor(k)
	if err != nil {
		return 0, err
	}
	st, err := os.Stat(p)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("log %s: %w", k, err)
	}
	return uint64(st.Size()), nil
}

// Follow calls fn with the log's bytes from offset on, in chunks of at most
// ReadChunk bytes, in order. While the attempt is under way it waits for
// more; it returns nil once the attempt ended and every byte was passed on,
// fn's error, or ctx's error. A log that does not exist and whose attempt
// is not under way is an error wrapping fs.ErrNotExist.
func (b *Book) Follow(ctx context.Context, k Key, offset uint64, fn func(offset uint64, data []byte) error) error {
	p, err := b.pathFor(k)
	if err != nil {
		return err
	}
	buf := make([]byte, ReadChunk)
	sawLive := false
	var f *os.File
	defer func() {
		if f != nil {
			f.Close()
		}
	}()
	for {
		b.mu.Lock()
		la := b.live[attemptKey{k.MessageID, k.Attempt}]
		var changed chan struct{}
		if la != nil {
			changed = la.changed
		}
		b.mu.Unlock()
		sawLive = sawLive || la != nil

		if f == nil {
			f, err = os.Open(p)
			if errors.Is(err, fs.ErrNotExist) {
				f = nil
				if la == nil {
					if sawLive {
						return nil // the attempt ended without writing this log
					}
					return fmt.Errorf("log %s: %w", k, err)
				}
			} else if err != nil {
				return fmt.Errorf("follow log %s: %w", k, err)
			}
		}
		if f != nil {
			for {
				n, rerr := f.ReadAt(buf, int64(offset))
				if n > 0 {
					if err := fn(offset, buf[:n]); err != nil {
						return err
					}
					offset += uint64(n)
				}
				if rerr == io.EOF || n == 0 {
					break
				}
				if rerr != nil {
					return fmt.Errorf("follow log %s: %w", k, rerr)
				}
			}
		}
		if la == nil {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
