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

// Pick returns the index in entries of the message to process next given
// the current chain, or -1. Entries with Err are skipped. Among the rest,
// a message of current wins; ties (and the no-current case) go to the
// smallest chain, then the smallest seq, then the file name.
func Pick(entries []store.Entry, current string) int {
	best := -1
	better := func(a, b store.Entry) bool { // a before b?
		if ac, bc := a.Chain == current && current != "", b.Chain == current && current != ""; ac != bc {
			return ac
		}
		if a.Chain != b.Chain {
			return a.Chain < b.Chain
		}
		if a.Seq != b.Seq {
			return a.Seq < b.Seq
		}
		return a.File < b.File
	}
	for i, e := range entries {
		if e.Err != nil {
			continue
		}
		if best < 0 || better(e, entries[best]) {
			best = i
		}
	}
	return best
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
	entries, err := s.st.ListInbox()
	if err != nil {
		return sel, fmt.Errorf("select next message: %w", err)
	}
	var good []store.Entry
	for _, e := range entries {
		if e.Err == nil {
			if opts.OnlyChain == "" || e.Chain == opts.OnlyChain {
				good = append(good, e)
			}
			continue
		}
		reason := store.ReasonInvalidMessage
		var bad *store.BadMessageError
		if errors.As(e.Err, &bad) && bad.Reason != "" {
			reason = bad.Reason
		}
		note := store.DeadNote{Reason: reason,
			Detail: e.Err.Error() + "\n\nFix the file and move it back into .decree/inbox/ to process it."}
		if err := s.reject(&sel, e, note); err != nil {
			return sel, err
		}
	}
	for {
		i := Pick(good, s.current)
		if i < 0 {
			break
		}
		e := good[i]
		good = append(good[:i], good[i+1:]...)
		if e.Seq >= s.opts.MaxDepth {
			note := store.DeadNote{Reason: store.ReasonMaxDepthExceeded, MessageID: e.ID,
				Detail: fmt.Sprintf("Message %s has seq %d, but max_depth is %d: the chain went too deep. Raise max_depth in .decree/config.yml or change the routine that spawns follow-ups, then requeue it.", e.ID, e.Seq, s.opts.MaxDepth)}
			if err := s.reject(&sel, e, note); err != nil {
				return sel, err
			}
			continue
		}
		sel.Entry, sel.Found = e, true
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
		return fmt.Errorf("select next message: %w", err)
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
