// Package sched picks the next inbox message to process, one at a time per
// project, depth-first: messages of the chain being processed come first
// (lowest seq first); otherwise the oldest chain (smallest chain id) starts,
// again lowest seq first. Files that are not usable messages and messages
// too deep in their chain are dead-lettered with a note on the way.
package sched

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/decreehq/decree/controller/store"
)

// DefaultMaxDepth rejects messages with seq >= 10.
const DefaultMaxDepth = 10

// ErrBusy is returned by Next while a selected message is not finished.
var ErrBusy = errors.New("a message is already being processed; call Finish first")

// Options configure a Scheduler.
type Options struct {
	// MaxDepth rejects messages whose seq is >= MaxDepth (default 10).
	MaxDepth int
	// Logger; nil discards.
	Logger *slog.Logger
}

// Rejection is a message dead-lettered by Next instead of being returned.
type Rejection struct {
	// File is the inbox file name it had; DeadFile its name in dead/.
	File     string
	DeadFile string
	// ID and Chain are empty when the file could not be read as a message.
	ID    string
	Chain string
	Note  store.DeadNote
}

// Selection is Next's answer.
type Selection struct {
	// Entry is the message to process now; valid when Found.
	Entry store.Entry
	Found bool
	// Rejected were dead-lettered on the way, in the order met.
	Rejected []Rejection
	// FinishedChain is the chain processed until now when it has no
	// message left (the selected message starts another chain, or none).
	FinishedChain string
}

// NextOptions narrow a selection.
type NextOptions struct {
	// OnlyChain considers messages of this chain only (as `decree run`
	// does for the chain it started).
	OnlyChain string
	// Chains, when set, considers only messages of chains it accepts;
	// files that are not usable messages are then left alone (not
	// dead-lettered), as they belong to no chain it was asked for.
	Chains func(chain string) bool
	// Exclude, when set, leaves messages of chains it names alone for now
	// (queued, untouched); unlike Chains it does not change how unusable
	// files are handled.
	Exclude func(chain string) bool
}

// Scheduler hands out messages one at a time. It is safe for concurrent
// use, but only one selected message may be unfinished at any moment.
type Scheduler struct {
	st   *store.Store
	opts Options

	mu      sync.Mutex
	current string // chain being processed
	busy    string // id of the selected, unfinished message
}

// New returns a scheduler over st.
func New(st *store.Store, opts Options) *Scheduler {
	if opts.MaxDepth <= 0 {
		opts.MaxDepth = DefaultMaxDepth
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	return &Scheduler{st: st, opts: opts}
}

// pickFrom returns the index of the message to process next, or -1.
// entries are in the store's processing order (usable messages first, by
// chain, seq and file name); only entries ok accepts count. A message of
// the current chain wins; otherwise the first (the smallest chain, then
// the smallest seq, then the file name).
func pickFrom(es []store.Entry, current string, ok func(*store.Entry) bool) int {
	first := -1
	for i := range es {
		e := &es[i]
		if e.Err != nil {
			break // unusable files are sorted last
		}
		if !ok(e) {
			continue
		}
		if current == "" || e.Chain == current {
			return i
		}
		if first < 0 {
			first = i
		}
	}
	return first
}

// Next reads the inbox and returns the message to process. Unusable files
// are dead-lettered (reason InvalidMessage) and messages with seq >=
// MaxDepth too (reason MaxDepthExceeded); both are listed in Rejected. The
// selected message stays the current one until Finish.
func (s *Scheduler) Next(opts NextOptions) (Selection, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var sel Selection
	if s.busy != "" {
		return sel, fmt.Errorf("select next message: %w (%s)", ErrBusy, s.busy)
	}
	accept := func(e *store.Entry) bool {
		return (opts.OnlyChain == "" || e.Chain == opts.OnlyChain) && (opts.Chains == nil || opts.Chains(e.Chain)) &&
			(opts.Exclude == nil || !opts.Exclude(e.Chain))
	}
	// handled are files refused during this call: they leave the index
	// when dead-lettered, but not when they could only be skipped.
	handled := map[string]bool{}
	// The index is read in place (no copy of the queue): the best
	// candidate and the unusable files (sorted last) are taken out, then
	// checked; a candidate refused or changed meanwhile means looking again.
	for range 1 << 16 {
		var bad []store.Entry
		var e store.Entry
		found := false
		err := s.st.ViewInbox(func(es []store.Entry) {
			if i := pickFrom(es, s.current, func(e *store.Entry) bool { return !handled[e.File] && accept(e) }); i >= 0 {
				e, found = es[i], true
			}
			if opts.Chains == nil {
				for j := len(es) - 1; j >= 0 && es[j].Err != nil; j-- {
					if !handled[es[j].File] {
						bad = append(bad, es[j])
					}
				}
			}
		})
		if err != nil {
			return sel, fmt.Errorf("select next message: %w", err)
		}
		for i := len(bad) - 1; i >= 0; i-- {
			b := bad[i]
			handled[b.File] = true
			reason := store.ReasonInvalidMessage
			var bm *store.BadMessageError
			if errors.As(b.Err, &bm) && bm.Reason != "" {
				reason = bm.Reason
			}
			note := store.DeadNote{Reason: reason,
				Detail: b.Err.Error() + "\n\nFix the file and move it back into .decree/inbox/ to process it."}
			if err := s.reject(&sel, b, note); err != nil {
				return sel, err
			}
		}
		if !found {
			break
		}
		if f := s.st.Fresh(e); f.ID != e.ID || f.Err != nil || !f.Message.Equal(e.Message) {
			// Changed since it was listed: choose again with its content
			// as it is now (Fresh updated the index).
			if f.Err != nil {
				handled[f.File] = true
				if err := s.reject(&sel, f, store.DeadNote{Reason: store.ReasonInvalidMessage,
					Detail: f.Err.Error() + "\n\nFix the file and move it back into .decree/inbox/ to process it."}); err != nil {
					return sel, err
				}
			}
			continue
		}
		if e.Seq >= s.opts.MaxDepth {
			handled[e.File] = true
			note := store.DeadNote{Reason: store.ReasonMaxDepthExceeded, MessageID: e.ID,
				Detail: fmt.Sprintf("Message %s has seq %d, but max_depth is %d: the chain went too deep. Raise max_depth in .decree/config.yml or change the routine that spawns follow-ups, then requeue it.", e.ID, e.Seq, s.opts.MaxDepth)}
			if err := s.reject(&sel, e, note); err != nil {
				return sel, err
			}
			continue
		}
		sel.Entry, sel.Found = e, true
		if e.Message != nil {
			// The store's index shares parsed messages between listings;
			// the loop gets its own copy to change.
			sel.Entry.Message = e.Message.Clone()
		}
		break
	}
	if s.current != "" && (!sel.Found || sel.Entry.Chain != s.current) {
		sel.FinishedChain = s.current
		s.current = ""
	}
	if sel.Found {
		s.current = sel.Entry.Chain
		s.busy = sel.Entry.ID
	}
	return sel, nil
}

func (s *Scheduler) reject(sel *Selection, e store.Entry, note store.DeadNote) error {
	dead, err := s.st.DeadLetter(e.File, note)
	if err != nil {
		// It cannot be moved away (a read-only inbox, ...): say so once
		// and skip it from now on, so it blocks nothing behind it.
		s.st.Skip(e.File)
		s.opts.Logger.Error("cannot dead-letter a refused inbox file; skipping it", "file", e.File, "err", err)
		note.Detail = fmt.Sprintf("%s\n\nIt could not be moved to .decree/inbox/dead/ (%v), so it stays in the inbox and is skipped until the controller restarts. Remove or fix it.", note.Detail, err)
		sel.Rejected = append(sel.Rejected, Rejection{File: e.File, ID: e.ID, Chain: e.Chain, Note: note})
		return nil
	}
	s.opts.Logger.Warn("message dead-lettered", "file", e.File, "reason", note.Reason)
	sel.Rejected = append(sel.Rejected, Rejection{File: e.File, DeadFile: dead, ID: e.ID, Chain: e.Chain, Note: note})
	return nil
}

// Finish marks the selected message id as finished (done, dead-lettered or
// cancelled), allowing the next selection.
func (s *Scheduler) Finish(id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.busy != id {
		return fmt.Errorf("finish %s: the message being processed is %q", id, s.busy)
	}
	s.busy = ""
	return nil
}

// Fork returns a new scheduler over the same store and options, with no
// message selected: a parallel lane selects its own chain's messages with
// one while the project's scheduler goes on with other chains.
func (s *Scheduler) Fork() *Scheduler {
	return New(s.st, s.opts)
}
