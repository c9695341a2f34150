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
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"time"
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

// ReadChunk is the most bytes a follower reads at a time: just under 1 MiB,
// so that a chunk streamed over gRPC (WatchLogs) fits its 1 MiB buffer
// class (gRPC clears a message's whole buffer before use: a 64 KiB chunk
// cost clearing 1 MiB on each side). A follower's buffer starts at
// firstRead and doubles while reads fill it, so following a quiet log
// costs little memory.
const ReadChunk = 1<<20 - 16<<10

const firstRead = 64 << 10

// Book is a set of logs. It is safe for concurrent use.
type Book struct {
	pathFor PathFunc
	opts    Options

	mu    sync.Mutex
	files map[Key]*logFile
	// ending holds the logs being ended in the background (ending.go),
	// each with a channel closed when it is done.
	ending map[Key]chan struct{}
	live   map[attemptKey]*liveAttempt
	began  chan struct{} // closed and replaced at every Begin
	// trimmed is signalled (with mu) when a background cut finishes, for
	// an Append waiting because the log outgrew the cut (see trim.go).
	trimmed *sync.Cond
}

type logFile struct {
	f        *os.File
	size     uint64 // logical bytes of the log received so far
	dropped  uint64 // logical bytes dropped from the front (truncation)
	header   int64  // bytes of the truncation notice at the start of the file
	fileSize int64
	trimming bool // a background cut is under way (trim.go)
	closed   bool // closed by closeLocked: a background cut in flight is dropped
}

type liveAttempt struct {
	refs    int
	changed chan struct{} // closed and replaced on every append and at the end
	streams map[string]bool
}

// New returns a book storing logs where pathFor says, with the default
// limits (DefaultMaxStreams streams per attempt, no size limit).
func New(pathFor PathFunc) *Book {
	return NewWithOptions(pathFor, Options{})
}

// NewWithOptions returns a book with the given limits.
func NewWithOptions(pathFor PathFunc, opts Options) *Book {
	if opts.MaxStreams <= 0 {
		opts.MaxStreams = DefaultMaxStreams
	}
	b := &Book{pathFor: pathFor, opts: opts, files: map[Key]*logFile{}, ending: map[Key]chan struct{}{}, live: map[attemptKey]*liveAttempt{}, began: make(chan struct{})}
	b.trimmed = sync.NewCond(&b.mu)
	return b
}

// Begin marks an attempt as under way: its followers wait for more bytes
// until End. Calls nest (each Begin needs an End).
func (b *Book) Begin(messageID string, attempt int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	ak := attemptKey{messageID, attempt}
	la := b.live[ak]
	if la == nil {
		la = &liveAttempt{changed: make(chan struct{}), streams: map[string]bool{}}
		b.live[ak] = la
		close(b.began)
		b.began = make(chan struct{})
	}
	la.refs++
}

// End marks the attempt as ended (after the last matching Begin): its files
// are cut to the limit, synced and closed in the background (see
// ending.go; Wait and WaitAttempt wait for that), and followers finish
// once they read to the end.
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
			b.closeLocked(k, lf)
		}
	}
	close(la.changed)
}

// openLocked returns the open file of k, opening it (and learning its size
// from the disk, so a restarted controller continues where it stopped).
// A log still being ended (ending.go) is waited for first.
func (b *Book) openLocked(k Key) (*logFile, error) {
	b.waitEndingLocked(k)
	if lf := b.files[k]; lf != nil {
		return lf, nil
	}
	p, err := b.pathFor(k)
	if err != nil {
		return nil, err
	}
	if la := b.live[attemptKey{k.MessageID, k.Attempt}]; la != nil && !la.streams[k.Stream] {
		if len(la.streams) >= b.opts.MaxStreams {
			return nil, fmt.Errorf("%w: %s attempt %d already has %d log streams (%s), the most one attempt may have; %q was refused",
				ErrTooManyStreams, k.MessageID, k.Attempt, len(la.streams), strings.Join(slices.Sorted(maps.Keys(la.streams)), ", "), k.Stream)
		}
		la.streams[k.Stream] = true
	}
	f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open log %s: %w", k, err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("open log %s: %w", k, err)
	}
	lf := &logFile{f: f, fileSize: st.Size()}
	lf.dropped, lf.header = readNotice(f)
	lf.size = lf.dropped + uint64(lf.fileSize-lf.header)
	b.files[k] = lf
	return lf, nil
}

// writeFailed reports a failed write to Options.WriteFailed.
func (b *Book) writeFailed(k Key, err error) {
	if f := b.opts.WriteFailed; f != nil {
		go f(k, err)
	}
}

// Append stores data, which starts at byte offset of the log, and returns
// the bytes stored afterwards. Bytes below the stored size are skipped; a
// chunk starting beyond it is refused with a *GapError.
func (b *Book) Append(k Key, offset uint64, data []byte) (uint64, error) {
	if len(data) > MaxChunkBytes {
		return 0, fmt.Errorf("%w: log %s: a chunk of %d bytes; at most %d are accepted (send smaller chunks)", ErrChunkTooLarge, k, len(data), MaxChunkBytes)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	lf, err := b.openLocked(k)
	if err != nil {
		b.writeFailed(k, err)
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
	lf.fileSize += int64(n)
	if err != nil {
		b.writeFailed(k, err)
		return lf.size, fmt.Errorf("append to log %s: %w", k, err)
	}
	if max := b.maxBytes(); max > 0 {
		b.trimLocked(k, lf, max)
	}
	if !b.isLiveLocked(k) {
		// Not under way: nothing else would close it.
		b.closeLocked(k, lf)
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

// Size returns the logical bytes stored for k, counting those a
// truncation dropped (0 when the log does not exist).
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
	f, err := os.Open(p)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("log %s: %w", k, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return 0, fmt.Errorf("log %s: %w", k, err)
	}
	dropped, header := readNotice(f)
	return dropped + uint64(st.Size()-header), nil
}

// Follow calls fn with the log's bytes from offset on, in chunks of at most
// ReadChunk bytes, in order. While the attempt is under way it waits for
// more; it returns nil once the attempt ended and every byte was passed on,
// fn's error, or ctx's error. A log that does not exist and whose attempt
// is not under way is an error wrapping fs.ErrNotExist.
//
// Offsets are logical: they count every byte the log ever received. When
// bytes a follower has not read yet were dropped by a truncation, it gets
// the log's notice line (which says so) and continues with the kept tail.
func (b *Book) Follow(ctx context.Context, k Key, offset uint64, fn func(offset uint64, data []byte) error) error {
	return b.FollowPending(ctx, k, offset, nil, fn)
}

// pendingPoll is how often FollowPending asks pending again while it waits
// for an attempt to begin.
const pendingPoll = 500 * time.Millisecond

// FollowPending is Follow for an attempt that may not have begun yet:
// while the log does not exist, its attempt is not under way and pending
// returns true (the caller knows the attempt is coming), it waits instead
// of failing. pending is asked again at every Begin and every half second.
func (b *Book) FollowPending(ctx context.Context, k Key, offset uint64, pending func() bool, fn func(offset uint64, data []byte) error) error {
	p, err := b.pathFor(k)
	if err != nil {
		return err
	}
	buf := make([]byte, firstRead)
	sawLive := false
	var f *os.File
	var dropped uint64
	var header int64
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
		began := b.began
		b.mu.Unlock()
		sawLive = sawLive || la != nil

		if f != nil && replaced(f, p) {
			f.Close()
			f = nil
		}
		if f == nil {
			f, err = os.Open(p)
			if errors.Is(err, fs.ErrNotExist) {
				f = nil
				if la == nil {
					if sawLive {
						return nil // the attempt ended without writing this log
					}
					if pending == nil || !pending() {
						return fmt.Errorf("log %s: %w", k, err)
					}
					select {
					case <-began:
					case <-time.After(pendingPoll):
					case <-ctx.Done():
						return ctx.Err()
					}
					continue
				}
			} else if err != nil {
				return fmt.Errorf("follow log %s: %w", k, err)
			}
			if f != nil {
				dropped, header = readNotice(f)
				if offset < dropped {
					notice := make([]byte, header)
					if _, err := f.ReadAt(notice, 0); err != nil {
						return fmt.Errorf("follow log %s: %w", k, err)
					}
					if err := fn(offset, notice); err != nil {
						return err
					}
					offset = dropped
				}
			}
		}
		if f != nil {
			for {
				n, rerr := f.ReadAt(buf, header+int64(offset-dropped))
				if n > 0 {
					if err := fn(offset, buf[:n]); err != nil {
						return err
					}
					offset += uint64(n)
					if n == len(buf) && len(buf) < ReadChunk {
						buf = make([]byte, min(2*len(buf), ReadChunk))
					}
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
			if f != nil && replaced(f, p) {
				continue // cut at the attempt's end: read the new file's tail
			}
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
