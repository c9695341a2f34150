package store

import (
	"encoding/json"
	"os"
	"strings"
	"time"

	"github.com/decreehq/decree/pkg/fsutil"
	"github.com/decreehq/decree/pkg/layout"
)

// What a listing of a .decree/ directory found (how many messages it
// holds, whether anything in it needs cleaning up) is kept in
// .decree/cache/dirs.json with the directory's stamp, and used instead of
// a new listing while the stamp is unchanged. Any name added, removed or
// renamed in a directory changes its mtime and ctime, so an unchanged
// stamp proves the facts current, provided the stamp was already older
// than the listing by racyWindow (a change in the same clock tick after
// the listing could otherwise leave the stamp as it was: git's racily
// clean rule). So `decreectl status` without a controller, and a store's
// start, cost the same with 10,000 messages queued or done as with one,
// except the first time after a change.

// racyWindow is how much older than a listing a directory's mtime must be
// for an unchanged stamp to prove the listing still current: coarser than
// the timestamp granularity of any file system decree runs on.
const racyWindow = 2 * time.Second

// dirCacheFile is the cache's path under .decree/.
var dirCacheFile = layout.Cache + "/dirs.json"

// dirFacts is what one listing of a directory found.
type dirFacts struct {
	Stamp stampJSON `json:"stamp"`
	// Messages counts the message files (layout.IsMessageFile, not a
	// directory).
	Messages int `json:"messages"`
	// Clean: no temporary file of an interrupted write and, in dead/, no
	// note without its message.
	Clean bool `json:"clean"`
}

// stampJSON is a dirStamp as the cache file stores it.
type stampJSON struct {
	Mtime int64  `json:"mtime"`
	Ctime int64  `json:"ctime"`
	Size  int64  `json:"size"`
	Ino   uint64 `json:"ino"`
}

func toJSON(st dirStamp) stampJSON {
	return stampJSON{Mtime: st.mtime, Ctime: st.ctime, Size: st.size, Ino: st.ino}
}

// loadDirCache reads the cache; a missing or unreadable one is empty.
func (s *Store) loadDirCache() {
	s.facts = map[string]dirFacts{}
	data, err := os.ReadFile(s.path(dirCacheFile))
	if err != nil {
		return
	}
	var m map[string]dirFacts
	if json.Unmarshal(data, &m) == nil {
		s.facts = m
	}
}

// cachedFacts returns the facts of .decree/rel while its stamp is the one
// they were listed under.
func (s *Store) cachedFacts(rel string) (dirFacts, bool) {
	s.cacheMu.Lock()
	f, ok := s.facts[rel]
	s.cacheMu.Unlock()
	if !ok {
		return f, false
	}
	st, stamped := stampOf(s.path(rel))
	return f, stamped && toJSON(st) == f.Stamp
}

// listFacts lists .decree/rel (unsorted) and returns its entries and what
// they show, keeping the facts when the stamp read before the listing was
// old enough to prove them (see above).
func (s *Store) listFacts(rel string) ([]os.DirEntry, dirFacts, error) {
	dir := s.path(rel)
	st, stamped := stampOf(dir)
	at := time.Now()
	f, err := os.Open(dir)
	if err != nil {
		return nil, dirFacts{}, err
	}
	ents, err := f.ReadDir(-1)
	f.Close()
	if err != nil {
		return nil, dirFacts{}, err
	}
	facts := dirFacts{Stamp: toJSON(st), Clean: true}
	var names map[string]bool
	if rel == layout.Dead {
		names = make(map[string]bool, len(ents))
		for _, e := range ents {
			names[e.Name()] = true
		}
	}
	for _, e := range ents {
		n := e.Name()
		switch {
		case isTemp(n):
			facts.Clean = false
		case layout.IsMessageFile(n) && !e.IsDir():
			facts.Messages++
		case names != nil && strings.HasSuffix(n, layout.DeadNoteSuffix) && !names[strings.TrimSuffix(n, layout.DeadNoteSuffix)]:
			facts.Clean = false // an orphaned note
		}
	}
	// Run directories are not kept: they are open runs, few, and a kept
	// entry would outlive its run.
	if stamped && st.mtime < at.Add(-racyWindow).UnixNano() && !strings.HasPrefix(rel, layout.Runs+"/") {
		s.keepFacts(rel, facts)
	}
	return ents, facts, nil
}

// keepFacts records facts for rel and saves the cache (best effort: the
// cache only spares listings).
func (s *Store) keepFacts(rel string, f dirFacts) {
	s.cacheMu.Lock()
	if old, ok := s.facts[rel]; ok && old == f {
		s.cacheMu.Unlock()
		return
	}
	if s.facts == nil {
		s.facts = map[string]dirFacts{}
	}
	s.facts[rel] = f
	data, err := json.Marshal(s.facts)
	s.cacheMu.Unlock()
	if err != nil {
		return
	}
	if err := os.MkdirAll(s.path(layout.Cache), 0o755); err != nil {
		return
	}
	_ = fsutil.ReplaceFileUnsynced(s.path(dirCacheFile), data, 0o644)
}
