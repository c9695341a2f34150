package store

import (
	"os"
	"syscall"
	"time"

	"github.com/decreehq/decree/pkg/layout"
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
//     rename and removal in it updates) and was checked within
//     RescanInterval, so files dropped in or edited by hand are seen within
//     that interval at the latest;
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
	if !ix.valid || time.Since(ix.fullAt) > RescanInterval {
		return false
	}
	st, ok := stampOf(s.path(layout.Inbox))
	return ok && st == ix.stamp
}

// ownInboxChange runs change, a write of the store to the inbox, and keeps
// the index current: apply updates the indexed entries when the index was
// current before the change; otherwise the next listing looks again.
func (s *Store) ownInboxChange(change func() error, apply func([]Entry) []Entry) error {
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
	ix.entries = apply(ix.entries)
	ix.stamp = after
	ix.byID = nil
	return nil
}

// dropEntry removes file from indexed entries.
func dropEntry(file string) func([]Entry) []Entry {
	return func(es []Entry) []Entry {
		out := es[:0:0]
		for _, e := range es {
			if e.File != file {
				out = append(out, e)
			}
		}
		return out
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
