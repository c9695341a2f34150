package store

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
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
	stamp   dirStamp  // without a watch: the directory's stamp at the listing
	checked time.Time // last listing
	fullAt  time.Time // last listing that checked every file's identity
	entries []Entry   // in processing order (sortEntries)
	keys    map[string]fileKey
	// pending are message files present but left out of the index for
	// now (their new chain id could not be written: a full disk); the
	// next full listing tries them again.
	pending map[string]bool
	// snap is the follow-up-shaped names of the index as a difference to
	// a recorded base (snapshot.go).
	snap snapDelta
}

// setKey records name's identity, noting a name new to the index.
func (ix *inboxIndex) setKey(name string, k fileKey) {
	if ix.keys == nil {
		ix.keys = map[string]fileKey{}
	}
	if _, ok := ix.keys[name]; !ok {
		ix.snap.added(name)
	}
	ix.keys[name] = k
}

// delKey forgets name.
func (ix *inboxIndex) delKey(name string) {
	if _, ok := ix.keys[name]; ok {
		delete(ix.keys, name)
		ix.snap.removed(name)
	}
}

// fullEvery is how often a listing checks every file's identity: the
// check costs a stat per queued file, so it is spread out as the queue
// grows.
func (ix *inboxIndex) fullEvery() time.Duration {
	return RescanInterval * time.Duration(max(1, len(ix.entries)/1000))
}

// findID returns the position of the queued message id in es (in
// processing order), by binary search on its chain and seq.
func findID(es []Entry, id string) (int, bool) {
	chain, seq, ok := message.SplitID(id)
	if !ok {
		return 0, false
	}
	i := sort.Search(len(es), func(i int) bool {
		e := &es[i]
		return e.Err != nil || e.Chain > chain || (e.Chain == chain && e.Seq >= seq)
	})
	for ; i < len(es) && es[i].Err == nil && es[i].Chain == chain && es[i].Seq == seq; i++ {
		if es[i].ID == id {
			return i, true
		}
	}
	return 0, false
}

// cachedInbox reports whether the indexed listing can be trusted, after
// bringing it up to date from the watch.
func (s *Store) cachedInbox() bool {
	if time.Since(s.inbox.fullAt) > s.inbox.fullEvery() {
		return false
	}
	return s.indexCurrent()
}

// indexCurrent brings the index up to date from the inbox watch's reports
// or, without a watch, compares the inbox directory's stamp; it reports
// whether the index now matches the inbox.
func (s *Store) indexCurrent() bool {
	ix := &s.inbox
	if !ix.valid {
		return false
	}
	dir := s.path(layout.Inbox)
	if s.watch == nil {
		st, ok := stampOf(dir)
		return ok && st == ix.stamp
	}
	var changed []string
	if !s.watch.drain(func(name string) { changed = append(changed, name) }) {
		s.watch.close()
		s.watch = nil
		ix.valid = false
		return false
	}
	if len(changed) > 0 {
		// A reported file is read again even when its identity looks
		// the same: a write within the file system's timestamp
		// granularity that kept the size changes no identity.
		s.updateIndex(dir, changed, true)
	}
	return true
}

// ownInboxChange runs change, a write of the store to the inbox, and keeps
// the index current: apply updates the indexed entries and their keys when
// the index was current before the change; otherwise the next listing looks
// again. (The watch reports the change too; the index then finds the file
// as apply left it and does nothing.)
func (s *Store) ownInboxChange(change func() error, apply func(*inboxIndex)) error {
	ix := &s.inbox
	current := s.indexCurrent()
	if err := change(); err != nil {
		ix.valid = false
		return err
	}
	if !current {
		ix.valid = false
		return nil
	}
	if s.watch == nil {
		after, ok := stampOf(s.path(layout.Inbox))
		if !ok {
			ix.valid = false
			return nil
		}
		ix.stamp = after
	}
	apply(ix)
	return nil
}

// dropEntry removes file from the index.
func dropEntry(file string) func(*inboxIndex) {
	return func(ix *inboxIndex) {
		// In place: nothing outside the store's lock holds the slice.
		ix.entries = slices.DeleteFunc(ix.entries, func(e Entry) bool { return e.File == file })
		ix.delKey(file)
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
	k, ok := s.loadKeyed(&ne, keyOf(fi))
	if !ok {
		return e // cannot be read as it is now (a full disk): keep what was listed
	}
	s.inbox.setKey(e.File, k)
	for i := range s.inbox.entries {
		if s.inbox.entries[i].File == e.File {
			s.inbox.entries[i] = ne
		}
	}
	sortEntries(s.inbox.entries)
	return ne
}

// ViewInbox calls fn with the inbox index's entries in processing order
// (usable messages by chain, seq and file name, then unusable files),
// listing the inbox first when the index cannot be trusted. fn runs under
// the store's lock: it must not keep the slice, change it or call the
// store. It spares callers that look for one entry a copy of the queue.
func (s *Store) ViewInbox(fn func([]Entry)) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	es, err := s.inboxLocked()
	if err != nil {
		return err
	}
	fn(es)
	return nil
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

// relistNames brings the index up to date between full listings, without
// a watch, at a cost that grows with the files added, not with the queue:
// the inbox's names are read (unsorted, no stat of the files already
// indexed), and the names that are new or gone go to updateIndex. Files
// edited in place are the full listing's business (see fullEvery). It
// reports false when the names cannot be read; the caller then lists the
// inbox in full.
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
	var changed []string
	for _, n := range names {
		if !layout.IsMessageFile(n) || s.skipped[n] {
			continue
		}
		if _, ok := ix.keys[n]; ok {
			present[n] = struct{}{}
			continue
		}
		changed = append(changed, n)
	}
	if len(present) < len(ix.keys) {
		for n := range ix.keys {
			if _, ok := present[n]; !ok {
				changed = append(changed, n)
			}
		}
	}
	s.updateIndex(dir, changed, false)
	ix.valid, ix.stamp, ix.checked = stamped, stamp, time.Now()
	if after, ok := stampOf(dir); !ok || after != stamp {
		ix.valid = false // changed while listing: look again next time
	}
	return ix.entries, true
}

// updateIndex brings the index's entries of the named files up to date:
// each is looked at (lstat); a file new to the index, or whose identity
// changed, is read and parsed and merged into the processing order; a
// file gone leaves the index. Names may repeat. With force, indexed files
// are read again even when their identity did not change.
func (s *Store) updateIndex(dir string, changed []string, force bool) {
	ix := &s.inbox
	gone := map[string]bool{}
	seen := make(map[string]bool, len(changed))
	var added []Entry
	addedKeys := map[string]fileKey{}
	for _, n := range changed {
		if seen[n] || !layout.IsMessageFile(n) || s.skipped[n] {
			continue
		}
		seen[n] = true
		old, indexed := ix.keys[n]
		fi, err := os.Lstat(filepath.Join(dir, n))
		if err != nil || fi.IsDir() {
			if indexed {
				gone[n] = true
			}
			delete(ix.pending, n)
			continue
		}
		k := keyOf(fi)
		if indexed {
			if old == k && !force {
				continue
			}
			gone[n] = true // changed: read again
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
		addedKeys[n] = k
		added = append(added, e)
	}
	if len(gone) == 0 && len(added) == 0 {
		return
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
			k, ok := s.loadKeyed(&e, addedKeys[e.File])
			if !ok {
				delete(addedKeys, e.File)
				if ix.pending == nil {
					ix.pending = map[string]bool{}
				}
				ix.pending[e.File] = true
				continue // left for a later listing (the disk is full)
			}
			addedKeys[e.File] = k
		}
		delete(ix.pending, e.File)
		loaded = append(loaded, e)
	}
	sortEntries(loaded)
	// In place (nothing outside the store's lock holds the slice): a
	// removal or an insertion moves the entries after it, one
	// allocation at most.
	if len(gone) > 0 {
		ix.entries = slices.DeleteFunc(ix.entries, func(e Entry) bool { return gone[e.File] })
		for n := range gone {
			ix.delKey(n)
		}
	}
	if len(loaded) <= 16 {
		for _, e := range loaded {
			ix.insert(e)
		}
	} else {
		ix.entries = mergeEntries(ix.entries, loaded)
	}
	for n, k := range addedKeys {
		ix.setKey(n, k)
	}
}

// insert adds e to the entries at its place in processing order.
func (ix *inboxIndex) insert(e Entry) {
	at := sort.Search(len(ix.entries), func(i int) bool { return entryLess(e, ix.entries[i]) })
	ix.entries = slices.Insert(ix.entries, at, e)
}

// mergeEntries merges two lists in processing order into a new one.
func mergeEntries(a, b []Entry) []Entry {
	out := make([]Entry, 0, len(a)+len(b))
	i, j := 0, 0
	for i < len(a) && j < len(b) {
		if entryLess(b[j], a[i]) {
			out = append(out, b[j])
			j++
		} else {
			out = append(out, a[i])
			i++
		}
	}
	return append(append(out, a[i:]...), b[j:]...)
}
