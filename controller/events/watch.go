package events

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
)

// WatchOptions select what a watcher receives.
type WatchOptions struct {
	// From is the first sequence wanted; 0 means the oldest in the file.
	From uint64
	// Follow keeps the watcher open for new events; without it Next
	// returns io.EOF after the events that existed when Watch was called.
	Follow bool
	// Filter, when set, drops events it returns false for.
	Filter func(*Event) bool
}

// Watcher receives events in sequence order. Use it from one goroutine.
type Watcher struct {
	l        *Log
	filter   func(*Event) bool
	follow   bool
	next     uint64 // next sequence wanted
	liveFrom uint64 // first sequence delivered through live
	pending  []*Event
	live     chan *Event
	err      error // set before live is closed
}

// Watch starts a watcher: past events from opts.From are replayed (from
// memory or the file), then, with Follow, new events arrive as they are
// appended.
func (l *Log) Watch(opts WatchOptions) *Watcher {
	if opts.From == 0 {
		opts.From = 1
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	w := &Watcher{l: l, filter: opts.Filter, follow: opts.Follow, next: opts.From, liveFrom: l.seq + 1,
		live: make(chan *Event, l.opts.Buffer)}
	switch {
	case l.closed:
		w.err = ErrClosed
		close(w.live)
	case opts.Follow:
		l.watchers[w] = struct{}{}
	default:
		w.err = io.EOF
		close(w.live)
	}
	return w
}

// Next returns the next event. It returns io.EOF at the end of a watcher
// without Follow, a *SlowWatcherError when the watcher was cut off,
// ErrClosed when the log closed, or ctx's error.
func (w *Watcher) Next(ctx context.Context) (*Event, error) {
	for {
		if len(w.pending) > 0 {
			e := w.pending[0]
			w.pending = w.pending[1:]
			return e, nil
		}
		if w.next < w.liveFrom {
			batch, err := w.l.replay(w.next, w.liveFrom, 1024, w.filter)
			if err != nil {
				return nil, err
			}
			if len(batch) == 0 {
				w.next = w.liveFrom
				continue
			}
			w.pending = batch
			w.next = batch[len(batch)-1].Sequence + 1
			continue
		}
		select {
		case e, ok := <-w.live:
			if !ok {
				if slow, isSlow := w.err.(*SlowWatcherError); isSlow && slow.Resume < w.next {
					slow.Resume = w.next
				}
				return nil, w.err
			}
			if e.Sequence < w.next {
				continue
			}
			w.next = e.Sequence + 1
			return e, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// Close stops the watcher.
func (w *Watcher) Close() {
	w.l.mu.Lock()
	defer w.l.mu.Unlock()
	w.l.cutLocked(w, ErrClosed)
}

// replay returns up to max events with from <= sequence < to that pass
// filter, from memory when they are still kept, else from the file.
func (l *Log) replay(from, to uint64, max int, filter func(*Event) bool) ([]*Event, error) {
	l.mu.Lock()
	inMemory := len(l.recent) > 0 && from >= l.first
	var out []*Event
	if inMemory {
		start := sort.Search(len(l.recent), func(i int) bool { return l.recent[i].Sequence >= from })
		for _, e := range l.recent[start:] {
			if e.Sequence >= to || len(out) >= max {
				break
			}
			if filter == nil || filter(e) {
				out = append(out, e)
			}
		}
	}
	l.mu.Unlock()
	if inMemory {
		if len(out) == 0 {
			// Everything up to to was filtered out.
			return nil, nil
		}
		return out, nil
	}
	f, err := os.Open(l.path)
	if err != nil {
		return nil, fmt.Errorf("replay events: %w", err)
	}
	defer f.Close()
	r := bufio.NewReaderSize(f, 64<<10)
	for len(out) < max {
		line, err := r.ReadBytes('\n')
		if len(line) > 0 && line[len(line)-1] == '\n' {
			e := &Event{}
			if json.Unmarshal(bytes.TrimSpace(line), e) == nil && e.Sequence >= from && e.Sequence < to {
				if filter == nil || filter(e) {
					out = append(out, e)
				}
			}
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("replay events from %s: %w", l.path, err)
		}
	}
	return out, nil
}
