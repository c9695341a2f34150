package store

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sort"
	"syscall"
	"time"

	"github.com/decreehq/decree/pkg/fsutil"
	"github.com/decreehq/decree/pkg/layout"
	"github.com/decreehq/decree/pkg/message"
)

// Reading the inbox into the index: a full listing, and parsing one file.

// ListInbox reads every message in inbox/, normalised, ordered by chain,
// then seq, then file name; unusable files come last with Err set.
//
// A message dropped into the inbox without a chain (neither in its
// frontmatter nor in a "<chain>-<seq>.md" name) is given a fresh chain id
// and seq 0 here, and the normalised message is written back to its file
// atomically, so the id survives a restart. Such files get their ids in the
// order they arrived (modification time, then name).
//
// The listing comes from the inbox index when the inbox did not change
// (see index.go); unchanged files are never parsed twice.
func (s *Store) ListInbox() ([]Entry, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	es, err := s.inboxLocked()
	if err != nil {
		return nil, err
	}
	return append([]Entry(nil), es...), nil
}

// inboxLocked returns the index's entries (not a copy: read only), listing
// the inbox again when the index cannot be trusted. s.mu is held.
func (s *Store) inboxLocked() ([]Entry, error) {
	if s.cachedInbox() {
		return s.inbox.entries, nil
	}
	dir := s.path(layout.Inbox)
	s.startWatch(dir)
	stamp, stamped := stampOf(dir)
	// Between full checks (fullEvery) only new names are
	// looked at; a full check compares every file's identity (edits in
	// place). The message being taken is always checked (Fresh).
	full := time.Since(s.inbox.fullAt) > s.inbox.fullEvery() || s.inbox.keys == nil
	if !full && s.watch == nil && len(s.inbox.keys) == len(s.inbox.entries) {
		if out, ok := s.relistNames(dir, stamp, stamped); ok {
			return out, nil
		}
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("list inbox %s: %w", dir, err)
	}
	known := make(map[string]Entry, len(s.inbox.entries))
	if !full {
		for _, e := range s.inbox.entries {
			if e.Err == nil {
				known[e.File] = e
			}
		}
	}
	var out []Entry
	keys := make(map[string]fileKey, len(ents))
	pending := map[string]bool{}
	for _, de := range ents {
		if !layout.IsMessageFile(de.Name()) || de.IsDir() {
			continue
		}
		e := Entry{File: de.Name()}
		if s.skipped[e.File] {
			continue // refused before and could not be moved away
		}
		if k, ok := s.inbox.keys[e.File]; ok && !full && de.Type().IsRegular() {
			if old, ok := known[e.File]; ok {
				keys[e.File] = k
				out = append(out, old)
				continue
			}
		}
		if info, err := de.Info(); err == nil {
			e.ModTime = info.ModTime()
			keys[e.File] = keyOf(info)
		}
		switch {
		case message.CheckName(e.File) != nil:
			e.Err = &BadMessageError{File: e.File, Reason: ReasonUnsafeFileName,
				Err: fmt.Errorf("the file name %q holds control characters; it was not read. Give the message a plain name", e.File)}
		case !de.Type().IsRegular():
			e.Err = &BadMessageError{File: e.File, Reason: ReasonNotRegularFile,
				Err: fmt.Errorf("it is a %s, not a regular file; it was not opened. Put the message's content in a plain file", fsutil.FileKind(de.Type()))}
		}
		out = append(out, e)
	}
	sort.SliceStable(out, func(i, j int) bool {
		if (out[i].Message == nil) != (out[j].Message == nil) {
			return out[i].Message != nil // parsed first: new files get chains in arrival order after them
		}
		if !out[i].ModTime.Equal(out[j].ModTime) {
			return out[i].ModTime.Before(out[j].ModTime)
		}
		return out[i].File < out[j].File
	})
	old := map[string]Entry{}
	for _, e := range s.inbox.entries {
		if s.inbox.keys[e.File] == keys[e.File] && e.Err == nil {
			old[e.File] = e
		}
	}
	kept := out[:0]
	for i := range out {
		if out[i].Err != nil || out[i].Message != nil {
			kept = append(kept, out[i])
			continue
		}
		if e, ok := old[out[i].File]; ok {
			kept = append(kept, e) // unchanged since the last listing: not parsed again
			continue
		}
		k, ok := s.loadKeyed(&out[i], keys[out[i].File])
		if !ok {
			delete(keys, out[i].File)
			pending[out[i].File] = true
			continue // left for a later listing (the disk is full)
		}
		keys[out[i].File] = k
		kept = append(kept, out[i])
	}
	out = kept
	sortEntries(out)
	now := time.Now()
	ix := &s.inbox
	if full {
		ix.fullAt = now
	}
	ix.valid, ix.stamp, ix.checked, ix.entries, ix.pending = stamped, stamp, now, out, pending
	ix.snap.reset(keys, ix.keys)
	ix.keys = keys
	if after, ok := stampOf(dir); s.watch == nil && (!ok || after != stamp) {
		// Changed while listing (a write-back, or a file dropped in):
		// look again next time. (A watch reports those changes.)
		ix.valid = false
	}
	return out, nil
}

// startWatch (re)starts the inbox watch before a full listing when one is
// wanted, and discards the reports the listing makes stale.
func (s *Store) startWatch(dir string) {
	if s.watch != nil {
		s.watch.drain(func(string) {})
		return
	}
	if !s.watchWanted {
		return
	}
	w, err := newInboxWatch(s, dir)
	if err != nil {
		if errors.Is(err, errors.ErrUnsupported) {
			s.watchWanted = false // no inotify on this system: list (watch_other.go)
			return
		}
		if !errors.Is(err, fs.ErrNotExist) {
			s.watchWanted = false
			s.log.Warn("the inbox is not watched for changes; it is checked by listing instead", "err", err)
		}
		return
	}
	s.watch = w
}

func sortEntries(es []Entry) {
	sort.SliceStable(es, func(i, j int) bool { return entryLess(es[i], es[j]) })
}

// entryLess is the processing order of inbox entries.
func entryLess(a, b Entry) bool {
	if (a.Err == nil) != (b.Err == nil) {
		return a.Err == nil
	}
	if a.Chain != b.Chain {
		return a.Chain < b.Chain
	}
	if a.Seq != b.Seq {
		return a.Seq < b.Seq
	}
	return a.File < b.File
}

// afterRead, when set (by tests), runs after loadInbox read a file.
var afterRead func(path string)

// loadKeyed is loadInbox returning the identity the entry stands
// for: k, the file's as it was before it was read (so that a write that
// was still under way shows as a change), or the file's after the load
// wrote it back with a chain id.
func (s *Store) loadKeyed(e *Entry, k fileKey) (fileKey, bool) {
	ok, rewrote := s.loadInbox(e)
	if ok && rewrote {
		if fi, err := os.Lstat(s.path(layout.Inbox, e.File)); err == nil {
			k = keyOf(fi)
		}
	}
	return k, ok
}

// AssignChains ends DeferChains: files without a chain id get one (and
// are rewritten with it) from the next listing on.
func (s *Store) AssignChains() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.deferChains {
		return
	}
	s.deferChains = false
	var chainless []string
	for _, e := range s.inbox.entries {
		if e.Err == nil && e.Chain == "" {
			chainless = append(chainless, e.File)
		}
	}
	for _, f := range chainless {
		dropEntry(f)(&s.inbox)
	}
	s.inbox.valid = false
}

// loadInbox parses and normalises e.File, assigning and persisting a
// chain when the message has none.
//
// It returns false when the entry must be left out of this listing: its
// new chain id could not be written for want of space (ENOSPC, EDQUOT). A
// full disk is no fault of the message, so it stays in the inbox, untouched,
// and is listed again once space is freed. It also returns false, without
// writing, for a file that needs a chain id, is shaped like a follow-up and
// appears while an attempt's follow-ups are still to be collected.
// rewrote says whether it wrote the file.
func (s *Store) loadInbox(e *Entry) (ok, rewrote bool) {
	p := s.path(layout.Inbox, e.File)
	m, err := readHeadFile(p) // the frontmatter only: entries never hold bodies
	if afterRead != nil {
		afterRead(p)
	}
	var pe *message.ParseError
	if err != nil && !errors.As(err, &pe) {
		reason := ReasonInvalidMessage
		if errors.Is(err, fsutil.ErrNotRegular) {
			reason = ReasonNotRegularFile
		}
		e.Err = &BadMessageError{File: e.File, Reason: reason, Err: fmt.Errorf("it cannot be read: %w", err)}
		return true, false
	}
	if err != nil {
		e.Err = &BadMessageError{File: e.File, Reason: ReasonInvalidMessage, Err: err}
		return true, false
	}
	_, hasChain := m.Get("chain")
	_, _, nameChain := message.ChainFromFileName(e.File)
	fresh := !hasChain && !nameChain
	if fresh && s.deferChains {
		// Listed as it is: no chain id is given (and the file is not
		// rewritten) until chains are assigned (AssignChains).
		e.Message = m
		return true, false
	}
	in := message.NormalizeInput{FileName: e.File}
	if fresh {
		in.Chain = s.chains.Next()
	}
	if err := message.Normalize(m, in); err != nil {
		e.Err = &BadMessageError{File: e.File, Reason: ReasonInvalidMessage, Err: err}
		return true, false
	}
	if fresh && s.inbox.snap.live && IsFollowUpName(e.File) {
		// Shaped like a follow-up, written while an attempt runs: its
		// collection decides about it, on the file as the routine left it
		// (ReleaseSnapshot lists it again afterwards).
		return false, false
	}
	if fresh {
		if err := rewriteFile(p, p, m, true); err != nil {
			if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) {
				s.log.Error("disk full: a new message stays in the inbox until space is freed", "file", e.File, "err", err)
				return false, false
			}
			e.Err = &BadMessageError{File: e.File, Reason: ReasonInvalidMessage,
				Err: fmt.Errorf("record the new chain id %s in the file: %w", in.Chain, err)}
			return true, false
		}
	}
	e.Message = m
	e.ID = m.ID()
	e.Chain = m.Chain()
	e.Seq, _ = m.Seq()
	s.chains.Observe(e.Chain)
	return true, fresh
}
