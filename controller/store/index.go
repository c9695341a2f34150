package store

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"syscall"
	"time"

	"github.com/decreehq/decree/pkg/fsutil"
	"github.com/decreehq/decree/pkg/layout"
	"github.com/decreehq/decree/pkg/message"
)

// The inbox index.
//
// Picking the next message, "is this chain finished?", status and every
// other listing ask ListInbox, often several times per processed message.
// Reading and parsing every queued file each time made the cost of a
// message grow with the queue. So the store keeps the inbox as it last
// listed it:
//
//   - a listing is reused as long as the inbox directory is unchanged
//     (its modification time, change time and size, which every create,
//     rename and removal in it updates); when it changed, only its names
//     are read again and only new files are read (relistNames);
//   - every file's identity is checked again (a full listing) once per
//     RescanInterval for every thousand queued messages (1 s up to 1,000
//     queued, 10 s at 10,000), so files edited in place by hand show in
//     listings within that time; the message taken for processing is always
//     read as it is then (Fresh);
//   - the store's own changes to the inbox (new messages, done, dead) update
//     the index in place, so they do not force a new listing;
//   - when a listing is needed, files whose identity (size, modification
//     time, inode) did not change are not read or parsed again.
//
// Summary counts done/ and dead/ without reading their files, so status
// stays cheap however many messages were processed.

// RescanInterval is how long an inbox listing is trusted without looking
// at the directory's files again (the directory's own stamp is still
// checked on every listing).
const RescanInterval = time.Second

// dirStamp identifies a directory's state: any entry created, renamed or
// removed changes it.
type dirStamp struct {
	mtime, ctime int64
	size         int64
	ino          uint64
}

func stampOf(dir string) (dirStamp, bool) {
	fi, err := os.Stat(dir)
	if err != nil {
		return dirStamp{}, false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return dirStamp{}, false
	}
	return dirStamp{mtime: fi.ModTime().UnixNano(), ctime: st.Ctim.Nano(), size: fi.Size(), ino: st.Ino}, true
}

// fileKey identifies a file's content without reading it.
type fileKey struct {
	size  int64
	mtime int64
	ino   uint64
}

func keyOf(fi os.FileInfo) fileKey {
	k := fileKey{size: fi.Size(), mtime: fi.ModTime().UnixNano()}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		k.ino = st.Ino
	}
	return k
}

// inboxIndex is the inbox as last listed. s.mu guards it.
type inboxIndex struct {
	valid   bool
	stamp   dirStamp
	checked time.Time // last listing
	fullAt  time.Time // last listing that checked every file's identity
	entries []Entry   // in processing order (sortEntries)
	keys    map[string]fileKey
	byID    map[string]int // entries by message id; nil until needed (byIDLocked)
}

// fullEvery is how often a listing checks every file's identity: the
// check costs a stat per queued file, so it is spread out as the queue
// grows.
func (ix *inboxIndex) fullEvery() time.Duration {
	return RescanInterval * time.Duration(max(1, len(ix.entries)/1000))
}

// byIDLocked returns the index's entries by message id, building the map
// once per change of the listing. s.mu is held, after inboxLocked.
func (s *Store) byIDLocked() map[string]int {
	ix := &s.inbox
	if ix.byID == nil || len(ix.byID) > len(ix.entries) {
		ix.byID = make(map[string]int, len(ix.entries))
		for i, e := range ix.entries {
			if e.ID != "" {
				ix.byID[e.ID] = i
			}
		}
	}
	return ix.byID
}

// cachedInbox reports whether the indexed listing can be trusted.
func (s *Store) cachedInbox() bool {
	ix := &s.inbox
	if !ix.valid || time.Since(ix.fullAt) > ix.fullEvery() {
		return false
	}
	st, ok := stampOf(s.path(layout.Inbox))
	return ok && st == ix.stamp
}

// ownInboxChange runs change, a write of the store to the inbox, and keeps
// the index current: apply updates the indexed entries and their keys when
// the index was current before the change; otherwise the next listing looks
// again.
func (s *Store) ownInboxChange(change func() error, apply func(*inboxIndex)) error {
	ix := &s.inbox
	dir := s.path(layout.Inbox)
	before, ok := stampOf(dir)
	current := ok && ix.valid && before == ix.stamp
	if err := change(); err != nil {
		ix.valid = false
		return err
	}
	if !current {
		ix.valid = false
		return nil
	}
	after, ok := stampOf(dir)
	if !ok {
		ix.valid = false
		return nil
	}
	apply(ix)
	ix.stamp = after
	ix.byID = nil
	return nil
}

// dropEntry removes file from the index.
func dropEntry(file string) func(*inboxIndex) {
	return func(ix *inboxIndex) {
		out := ix.entries[:0:0]
		for _, e := range ix.entries {
			if e.File != file {
				out = append(out, e)
			}
		}
		ix.entries = out
		delete(ix.keys, file)
	}
}

// Fresh returns e as its file is now: read again when the file changed
// since the index read it (a routine may still have been writing it when a
// listing ran; a file's content changes without changing its directory).
// The scheduler calls it on the message it selects, so a message always
// runs with the content it has when it is taken.
func (s *Store) Fresh(e Entry) Entry {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.path(layout.Inbox, e.File)
	fi, err := os.Lstat(p)
	if err != nil || !fi.Mode().IsRegular() || s.inbox.keys[e.File] == keyOf(fi) {
		return e
	}
	ne := Entry{File: e.File, ModTime: fi.ModTime()}
	if !s.loadInboxEntry(&ne) {
		return e // cannot be read as it is now (a full disk): keep what was listed
	}
	if fi, err := os.Lstat(p); err == nil {
		if s.inbox.keys == nil {
			s.inbox.keys = map[string]fileKey{}
		}
		s.inbox.keys[e.File] = keyOf(fi)
	}
	for i := range s.inbox.entries {
		if s.inbox.entries[i].File == e.File {
			s.inbox.entries[i] = ne
		}
	}
	sortEntries(s.inbox.entries)
	s.inbox.byID = nil
	return ne
}

// ChainsQueued reports whether any message of chains is in the inbox,
// from the index (no copy of the listing).
func (s *Store) ChainsQueued(chains map[string]bool) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	es, err := s.inboxLocked()
	if err != nil {
		return false, err
	}
	for _, e := range es {
		if chains[e.Chain] {
			return true, nil
		}
	}
	return false, nil
}

// relistNames brings the index up to date between full listings, at a
// cost that grows with the files added, not with the queue: the inbox's
// names are read (unsorted, no stat of the files already indexed), files
// gone leave the index, and new files are read, parsed and merged into
// the processing order. Files edited in place are the full listing's
// business (see fullEvery). It reports false when the index cannot
// be updated this way; the caller then lists the inbox in full.
func (s *Store) relistNames(dir string, stamp dirStamp, stamped bool) ([]Entry, bool) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, false
	}
	names, err := f.Readdirnames(-1)
	f.Close()
	if err != nil {
		return nil, false
	}
	ix := &s.inbox
	present := make(map[string]struct{}, len(ix.keys))
	var added []Entry
	addedKeys := map[string]fileKey{}
	for _, n := range names {
		if !layout.IsMessageFile(n) || s.skipped[n] {
			continue
		}
		if _, ok := ix.keys[n]; ok {
			present[n] = struct{}{}
			continue
		}
		fi, err := os.Lstat(filepath.Join(dir, n))
		if err != nil || fi.IsDir() {
			continue // gone meanwhile, or a directory
		}
		e := Entry{File: n, ModTime: fi.ModTime()}
		switch {
		case message.CheckName(n) != nil:
			e.Err = &BadMessageError{File: n, Reason: ReasonUnsafeFileName,
				Err: fmt.Errorf("the file name %q holds control characters; it was not read. Give the message a plain name", n)}
		case !fi.Mode().IsRegular():
			e.Err = &BadMessageError{File: n, Reason: ReasonNotRegularFile,
				Err: fmt.Errorf("it is a %s, not a regular file; it was not opened. Put the message's content in a plain file", fsutil.FileKind(fi.Mode().Type()))}
		}
		addedKeys[n] = keyOf(fi)
		added = append(added, e)
	}
	// New files get chains in arrival order.
	sort.SliceStable(added, func(i, j int) bool {
		if !added[i].ModTime.Equal(added[j].ModTime) {
			return added[i].ModTime.Before(added[j].ModTime)
		}
		return added[i].File < added[j].File
	})
	loaded := added[:0]
	for i := range added {
		e := added[i]
		if e.Err == nil {
			if !s.loadInboxEntry(&e) {
				delete(addedKeys, e.File)
				continue // left for a later listing (the disk is full)
			}
			// It may have been written back with a new chain.
			if fi, err := os.Lstat(filepath.Join(dir, e.File)); err == nil {
				addedKeys[e.File] = keyOf(fi)
			}
		}
		loaded = append(loaded, e)
	}
	sortEntries(loaded)
	kept := ix.entries
	if len(present) < len(ix.keys) {
		kept = make([]Entry, 0, len(present))
		for _, e := range ix.entries {
			if _, ok := present[e.File]; ok {
				kept = append(kept, e)
			} else {
				delete(ix.keys, e.File)
			}
		}
	}
	// Merge the two ordered lists.
	out := make([]Entry, 0, len(kept)+len(loaded))
	i, j := 0, 0
	for i < len(kept) && j < len(loaded) {
		if entryLess(loaded[j], kept[i]) {
			out = append(out, loaded[j])
			j++
		} else {
			out = append(out, kept[i])
			i++
		}
	}
	out = append(append(out, kept[i:]...), loaded[j:]...)
	for n, k := range addedKeys {
		ix.keys[n] = k
	}
	ix.entries, ix.byID = out, nil
	ix.valid, ix.stamp, ix.checked = stamped, stamp, time.Now()
	if after, ok := stampOf(dir); !ok || after != stamp {
		ix.valid = false // changed while listing: look again next time
	}
	return out, true
}
