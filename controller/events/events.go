// Package events is the controller's event log: an append-only file of
// Event values (one JSON object per line, .decree/events.jsonl)
// with increasing sequence numbers that continue across restarts, and an
// in-memory fan-out to watchers.
//
// A watcher gets events through a bounded buffer. Appending never waits
// for a watcher: one whose buffer is full is cut off, and its Next returns
// a *SlowWatcherError naming the sequence to resume from (Watch with that
// sequence replays from the file, then continues live).
package events

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/decreehq/decree/pkg/layout"
)

// FileName is the event log's name inside .decree/.
const FileName = layout.Events

// ErrClosed is returned by a watcher or Append after the log was closed.
var ErrClosed = errors.New("event log closed")

// SlowWatcherError is returned by Watcher.Next after the watcher fell
// behind and was cut off.
type SlowWatcherError struct {
	// Resume is the first sequence number the watcher did not receive.
	Resume uint64
	// Buffer is the buffer size it overflowed.
	Buffer int
}

func (e *SlowWatcherError) Error() string {
	return fmt.Sprintf("event watcher fell more than %d events behind and was disconnected; watch again from sequence %d to continue", e.Buffer, e.Resume)
}

// Options configure a Log.
type Options struct {
	// Buffer is each watcher's buffer, in events (default 256).
	Buffer int
	// Keep is how many recent events stay in memory for quick replay
	// (default 4096); older ones are read from the file.
	Keep int
	// Now is the clock (time.Now when nil).
	Now func() time.Time
	// Logger receives recovery reports; nil discards them.
	Logger *slog.Logger
}

// Log is an open event log. It is safe for concurrent use.
type Log struct {
	path string
	opts Options

	mu       sync.Mutex
	f        *os.File
	seq      uint64
	first    uint64   // sequence of recent[0]
	recent   []*Event // the last Keep events
	watchers map[*Watcher]struct{}
	closed   bool
}

// Open opens (creating when missing) the event log at path. A torn last
// line (the controller died while writing it) is cut off; the sequence
// continues after the last whole event.
func Open(path string, opts Options) (*Log, error) {
	if opts.Buffer <= 0 {
		opts.Buffer = 256
	}
	if opts.Keep <= 0 {
		opts.Keep = 4096
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	l := &Log{path: path, opts: opts, watchers: map[*Watcher]struct{}{}}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open event log %s: %w", path, err)
	}
	good, err := l.load(f)
	if err != nil {
		f.Close()
		return nil, err
	}
	if st, err := f.Stat(); err == nil && st.Size() != good {
		opts.Logger.Warn("cutting a torn line off the end of the event log", "path", path, "bytes", st.Size()-good)
		if err := f.Truncate(good); err != nil {
			f.Close()
			return nil, fmt.Errorf("open event log %s: cut torn last line: %w", path, err)
		}
	}
	if _, err := f.Seek(0, io.SeekEnd); err != nil {
		f.Close()
		return nil, fmt.Errorf("open event log %s: %w", path, err)
	}
	l.f = f
	return l, nil
}

// load reads every whole event, fills recent and seq, and returns the
// length of the file up to the last whole line.
func (l *Log) load(f *os.File) (int64, error) {
	r := bufio.NewReaderSize(f, 64<<10)
	var good int64
	for {
		line, err := r.ReadBytes('\n')
		if len(line) > 0 && line[len(line)-1] == '\n' {
			e := &Event{}
			if uerr := json.Unmarshal(bytes.TrimSpace(line), e); uerr != nil {
				l.opts.Logger.Warn("skipping an unreadable event log line", "path", l.path, "offset", good, "error", uerr)
			} else {
				if e.Sequence > l.seq {
					l.seq = e.Sequence
				}
				l.remember(e)
			}
			good += int64(len(line))
		}
		if err == io.EOF {
			return good, nil
		}
		if err != nil {
			return 0, fmt.Errorf("read event log %s: %w", l.path, err)
		}
	}
}

func (l *Log) remember(e *Event) {
	if len(l.recent) == 0 {
		l.first = e.Sequence
	}
	l.recent = append(l.recent, e)
	if over := len(l.recent) - l.opts.Keep; over > 0 {
		l.recent = append(l.recent[:0:0], l.recent[over:]...)
		l.first = l.recent[0].Sequence
	}
}

// Last is the sequence number of the newest event (0 when none).
func (l *Log) Last() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.seq
}

// Append stamps a copy of e with the next sequence number (and the time,
// when e has none), writes it, hands it to the watchers, and returns the
// copy. When the write fails (a full disk) the event is still handed to
// the watchers, and the error wraps ErrNotPersisted.
func (l *Log) Append(e *Event) (*Event, error) {
	c := *e
	e = &c
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil, ErrClosed
	}
	e.Sequence = l.seq + 1
	if e.Time.IsZero() {
		e.Time = l.opts.Now()
	}
	line, err := json.Marshal(e)
	if err != nil {
		return nil, fmt.Errorf("append event: encode: %w", err)
	}
	line = append(bytes.ReplaceAll(line, []byte("\n"), nil), '\n')
	var werr error
	if pos, err := l.f.Seek(0, io.SeekCurrent); err != nil {
		werr = err
	} else if _, err := l.f.Write(line); err != nil {
		// A full disk, most likely: take back a partial line so the file
		// stays whole, and still hand the event to the watchers (a
		// warning that the disk is full must reach people).
		_ = l.f.Truncate(pos)
		_, _ = l.f.Seek(pos, io.SeekStart)
		werr = err
	}
	if werr != nil {
		werr = fmt.Errorf("%w: append event to %s: %w", ErrNotPersisted, l.path, werr)
	}
	// No fsync per event: the log is the activity feed, not the record
	// (inbox/ and runs/<id>/state.json are, and are synced). A killed
	// controller loses nothing written here; Close syncs.
	l.seq = e.Sequence
	l.remember(e)
	for w := range l.watchers {
		if w.filter != nil && !w.filter(e) {
			continue
		}
		select {
		case w.live <- e:
		default:
			l.cutLocked(w, &SlowWatcherError{Resume: e.Sequence, Buffer: l.opts.Buffer})
		}
	}
	return e, werr
}

// ErrNotPersisted is wrapped by Append when the event could not be written
// to the file (a full disk): it was still numbered, kept in memory and
// handed to the watchers.
var ErrNotPersisted = errors.New("event not written to disk")

func (l *Log) cutLocked(w *Watcher, err error) {
	if _, ok := l.watchers[w]; !ok {
		return
	}
	delete(l.watchers, w)
	w.err = err
	close(w.live)
}

// Close closes the file; watchers get ErrClosed after their buffers.
func (l *Log) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil
	}
	l.closed = true
	for w := range l.watchers {
		l.cutLocked(w, ErrClosed)
	}
	serr := l.f.Sync()
	if err := l.f.Close(); err != nil {
		return err
	}
	return serr
}
