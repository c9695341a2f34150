package store

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/decreehq/decree/pkg/fsutil"
	"github.com/decreehq/decree/pkg/layout"
)

// Inbox snapshots.
//
// Before every attempt the processing loop records which inbox files
// existed, so that afterwards the follow-ups the routine wrote can be told
// apart from messages queued before (and a collection replayed after a
// crash sees the same difference). Only names shaped like follow-ups,
// "<digits>-<digits>.md", matter to that comparison, so only those are
// recorded.
//
// With thousands of messages queued, writing every name before every
// attempt would make each message cost time in proportion to the queue.
// So a snapshot is recorded as a difference: the store writes the queued
// names once into a base file (runs/.inbox-base.txt, fsynced, then only
// replaced, never changed), hard-links it into the run directory as
// inbox-base.txt, and writes into inbox-before.txt only the names added
// ("+name") and removed ("-name") since that base. The store keeps that
// difference current as the inbox index changes, and writes a new base
// when the difference grows past a quarter of the base (at least 256
// names). A run directory thus always holds everything its snapshot needs,
// whatever happened to the store's base since.
//
// inbox-before.txt written by older versions (one name per line, no
// header) is still read.

// snapshotHeader starts an inbox-before.txt that is a difference to the
// run's inbox-base.txt.
const snapshotHeader = "# decree inbox snapshot: inbox-base.txt with these names added (+) and removed (-)"

// baseFile is the store's current base, in runs/ (hidden: not a run).
const baseFile = ".inbox-base.txt"

// InboxSnapshot is the set of follow-up-shaped inbox file names present
// before an attempt, so that the files a routine adds can be told apart
// afterwards.
type InboxSnapshot struct {
	// gen numbers the snapshots SnapshotInbox takes (0: read from a run).
	gen   uint64
	base  *snapBase
	plus  map[string]struct{} // in the snapshot, not in base
	minus map[string]struct{} // in base, not in the snapshot
}

// snapBase is an immutable set of names written to a file.
type snapBase struct {
	names map[string]struct{}
	path  string // where it is written; "" for a base read from a run
	file  os.FileInfo
}

// intact reports whether the base's file is still the one written.
func (b *snapBase) intact() bool {
	fi, err := os.Stat(b.path)
	return err == nil && os.SameFile(b.file, fi)
}

// Has reports whether name was in the inbox when the snapshot was taken.
// Names not shaped like follow-ups are never in a snapshot.
func (s InboxSnapshot) Has(name string) bool {
	if _, ok := s.plus[name]; ok {
		return true
	}
	if s.base == nil {
		return false
	}
	if _, ok := s.minus[name]; ok {
		return false
	}
	_, ok := s.base.names[name]
	return ok
}

// Names lists the snapshot's names, sorted.
func (s InboxSnapshot) Names() []string {
	var out []string
	if s.base != nil {
		for n := range s.base.names {
			if _, gone := s.minus[n]; !gone {
				out = append(out, n)
			}
		}
	}
	for n := range s.plus {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// snapDelta keeps the index's follow-up-shaped names as a difference to
// a base; the index calls added and removed as names come and go.
type snapDelta struct {
	base        *snapBase
	plus, minus map[string]struct{}
	// gen is the number of the last snapshot taken; fresh are the names
	// added to the index since (a superset: some may be gone again), so
	// that collecting after an attempt looks at those alone.
	gen   uint64
	fresh map[string]struct{}
	// live: a snapshot was taken and its attempt's follow-ups are not
	// collected or discarded yet (ReleaseSnapshot).
	live bool
}

func (d *snapDelta) added(name string) {
	if !IsFollowUpName(name) {
		return
	}
	if d.fresh == nil {
		d.fresh = map[string]struct{}{}
	}
	d.fresh[name] = struct{}{}
	if _, inBase := d.baseHas(name); inBase {
		delete(d.minus, name)
		return
	}
	if d.plus == nil {
		d.plus = map[string]struct{}{}
	}
	d.plus[name] = struct{}{}
}

func (d *snapDelta) removed(name string) {
	if !IsFollowUpName(name) {
		return
	}
	if _, inBase := d.baseHas(name); inBase {
		if d.minus == nil {
			d.minus = map[string]struct{}{}
		}
		d.minus[name] = struct{}{}
		return
	}
	delete(d.plus, name)
}

func (d *snapDelta) baseHas(name string) (struct{}, bool) {
	if d.base == nil {
		return struct{}{}, false
	}
	v, ok := d.base.names[name]
	return v, ok
}

// reset recomputes the difference for the names of keys (after a full
// listing); names not in old are fresh.
func (d *snapDelta) reset(keys, old map[string]fileKey) {
	prev := d.fresh
	d.plus, d.minus, d.fresh = nil, nil, nil
	for n := range keys {
		d.added(n)
	}
	// Fresh stay the names new to the index and those fresh before.
	for n := range d.fresh {
		_, known := old[n]
		_, was := prev[n]
		if known && !was {
			delete(d.fresh, n)
		}
	}
	if d.base != nil {
		for n := range d.base.names {
			if _, ok := keys[n]; !ok {
				d.removed(n)
			}
		}
	}
}

// rebase makes names the new base, written to path.
func (d *snapDelta) rebase(names map[string]struct{}, path string) error {
	list := make([]string, 0, len(names))
	for n := range names {
		list = append(list, n)
	}
	sort.Strings(list)
	var b bytes.Buffer
	for _, n := range list {
		b.WriteString(n)
		b.WriteByte('\n')
	}
	if err := fsutil.WriteFileAtomic(path, b.Bytes(), 0o644); err != nil {
		return fmt.Errorf("write inbox snapshot base: %w", err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("write inbox snapshot base: %w", err)
	}
	d.base, d.plus, d.minus = &snapBase{names: names, path: path, file: fi}, nil, nil
	return nil
}

// SnapshotInbox records the inbox's follow-up-shaped message files (from
// the inbox index), including files refused but left in place (Skip) and
// files not indexed yet.
func (s *Store) SnapshotInbox() (InboxSnapshot, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, err := s.inboxLocked(); err != nil {
		return InboxSnapshot{}, fmt.Errorf("snapshot inbox: %w", err)
	}
	d := &s.inbox.snap
	size := 0
	if d.base != nil {
		size = len(d.base.names)
	}
	// A new base when there is none, when the difference grew, or when
	// the file was removed or replaced by hand (runs could not link it).
	if d.base == nil || len(d.plus)+len(d.minus) > max(256, size/4) || !d.base.intact() {
		names := map[string]struct{}{}
		for n := range s.inbox.keys {
			if IsFollowUpName(n) {
				names[n] = struct{}{}
			}
		}
		if err := d.rebase(names, s.path(layout.Runs, baseFile)); err != nil {
			return InboxSnapshot{}, fmt.Errorf("snapshot inbox: %w", err)
		}
	}
	s.placed = nil
	d.gen++
	d.fresh = nil
	d.live = true
	snap := InboxSnapshot{gen: d.gen, base: d.base, plus: make(map[string]struct{}, len(d.plus)), minus: make(map[string]struct{}, len(d.minus))}
	for n := range d.plus {
		snap.plus[n] = struct{}{}
	}
	for n := range d.minus {
		snap.minus[n] = struct{}{}
	}
	for _, extra := range []map[string]bool{s.skipped, s.inbox.pending} {
		for n := range extra {
			if IsFollowUpName(n) {
				snap.plus[n] = struct{}{}
			}
		}
	}
	return snap, nil
}

// ReleaseSnapshot says that the follow-ups of the attempt of the last
// snapshot were collected or discarded: files in the inbox shaped like
// follow-ups are again given chain ids as they are listed.
func (s *Store) ReleaseSnapshot() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.releaseSnapshotLocked()
}

func (s *Store) releaseSnapshotLocked() {
	ix := &s.inbox
	if !ix.snap.live {
		return
	}
	ix.snap.live = false
	if len(ix.pending) > 0 && ix.valid {
		names := make([]string, 0, len(ix.pending))
		for n := range ix.pending {
			names = append(names, n)
		}
		s.updateIndex(s.path(layout.Inbox), names, false)
	}
}

// RecordInboxSnapshot writes snap into the run directory (its base as
// layout.InboxBaseFile, linked, and the difference as
// layout.InboxBeforeFile), for a collection replayed after a crash. Both
// are made durable by the run's next Commit.
func (r *Run) RecordInboxSnapshot(snap InboxSnapshot) error {
	var b strings.Builder
	b.WriteString(snapshotHeader + "\n")
	if snap.base != nil {
		if err := r.linkBase(snap.base); err != nil {
			return err
		}
	}
	lines := make([]string, 0, len(snap.plus)+len(snap.minus))
	for n := range snap.plus {
		lines = append(lines, "+"+n)
	}
	for n := range snap.minus {
		lines = append(lines, "-"+n)
	}
	sort.Strings(lines)
	for _, l := range lines {
		b.WriteString(l)
		b.WriteByte('\n')
	}
	return r.WriteFile(layout.InboxBeforeFile, []byte(b.String()))
}

// linkBase makes the run's inbox-base.txt the base's file (a hard link:
// no copy), unless it already is.
func (r *Run) linkBase(base *snapBase) error {
	dst := filepath.Join(r.dir, layout.InboxBaseFile)
	if di, err := os.Stat(dst); err == nil && os.SameFile(base.file, di) {
		return nil
	}
	if !base.intact() {
		return fmt.Errorf("record inbox snapshot of %s: its base %s was replaced or removed meanwhile; take the snapshot again", r.id, base.path)
	}
	tmp := filepath.Join(r.dir, "."+layout.InboxBaseFile+".tmp-link")
	_ = os.Remove(tmp)
	if err := os.Link(base.path, tmp); err != nil {
		if !fsutil.LinkUnsupported(err) {
			return fmt.Errorf("record inbox snapshot of %s: %w", r.id, err)
		}
		// A file system without hard links (FAT, exFAT, some network
		// shares): the run gets a copy.
		data, rerr := os.ReadFile(base.path)
		if rerr != nil {
			return fmt.Errorf("record inbox snapshot of %s: %w", r.id, rerr)
		}
		if werr := os.WriteFile(tmp, data, 0o644); werr != nil {
			return fmt.Errorf("record inbox snapshot of %s: %w", r.id, werr)
		}
	}
	if err := os.Rename(tmp, dst); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("record inbox snapshot of %s: %w", r.id, err)
	}
	// The file was made durable when the base was written; its new name
	// is, with the run directory, by the Commit that makes the
	// difference (inbox-before.txt) durable.
	return nil
}

// InboxSnapshot reads the snapshot RecordInboxSnapshot wrote; false when
// there is none or it cannot be read whole.
func (r *Run) InboxSnapshot() (InboxSnapshot, bool) {
	f, err := os.Open(filepath.Join(r.dir, layout.InboxBeforeFile))
	if err != nil {
		return InboxSnapshot{}, false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	snap := InboxSnapshot{plus: map[string]struct{}{}, minus: map[string]struct{}{}}
	first := true
	for sc.Scan() {
		line := sc.Text()
		if first {
			first = false
			if line == snapshotHeader {
				names, err := readNames(filepath.Join(r.dir, layout.InboxBaseFile))
				if err != nil {
					return InboxSnapshot{}, false
				}
				snap.base = &snapBase{names: names}
				continue
			}
		}
		switch {
		case line == "":
		case snap.base == nil: // an older version's list of names
			snap.plus[line] = struct{}{}
		case line[0] == '+':
			snap.plus[line[1:]] = struct{}{}
		case line[0] == '-':
			snap.minus[line[1:]] = struct{}{}
		}
	}
	if sc.Err() != nil {
		return InboxSnapshot{}, false
	}
	return snap, true
}

// readNames reads a base file: one name per line.
func readNames(path string) (map[string]struct{}, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	names := map[string]struct{}{}
	for _, n := range strings.Split(string(b), "\n") {
		if n != "" {
			names[n] = struct{}{}
		}
	}
	return names, nil
}
