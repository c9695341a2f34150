package store

import (
	"fmt"
	"os"
	"sort"
	"strings"

	"github.com/decreehq/decree/pkg/layout"
	"github.com/decreehq/decree/pkg/message"
)

// runIndex lists the run ids of runs/, newest first, as of the directory's
// stamp: while runs/ gains or loses no directory, listings page through it
// without reading the directory or any run's state again.
type runIndex struct {
	stamp dirStamp
	ids   []string
}

// runIDs returns every run id, newest first (the slice is shared: do not
// change it).
func (s *Store) runIDs() ([]string, error) {
	dir := s.path(layout.Runs)
	st, stamped := stampOf(dir)
	s.cacheMu.Lock()
	idx := s.runIdx
	s.cacheMu.Unlock()
	if stamped && idx != nil && idx.stamp == st {
		return idx.ids, nil
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("list runs: %w", err)
	}
	ids := make([]string, 0, len(ents))
	for _, e := range ents {
		if e.IsDir() && CheckID(e.Name()) == nil {
			ids = append(ids, e.Name())
		}
	}
	sort.Slice(ids, func(i, j int) bool { return message.IDLess(ids[j], ids[i]) })
	if stamped {
		s.cacheMu.Lock()
		s.runIdx = &runIndex{stamp: st, ids: ids}
		s.cacheMu.Unlock()
	}
	return ids, nil
}

// RunsPage opens the runs of chain (every chain when chain is ""), newest
// first, starting after the run id after ("" starts at the newest), at
// most limit of them (all when limit <= 0); more says whether runs remain
// after the page. Only the page's runs are read: the ids come from an
// index of runs/ (runIDs), so paging through n runs reads each state once
// instead of every state per page. Runs whose state cannot be read are
// left out.
func (s *Store) RunsPage(chain, after string, limit int) (runs []*Run, more bool, err error) {
	ids, err := s.runIDs()
	if err != nil {
		return nil, false, err
	}
	start := 0
	if after != "" {
		// ids are sorted newest first: find the first one older than after.
		start = sort.Search(len(ids), func(i int) bool { return message.IDLess(ids[i], after) })
	}
	for i := start; i < len(ids); i++ {
		id := ids[i]
		if chain != "" && !strings.HasPrefix(id, chain+"-") {
			continue
		}
		if limit > 0 && len(runs) == limit {
			return runs, true, nil
		}
		run, err := s.OpenRun(id)
		if err != nil {
			continue
		}
		runs = append(runs, run)
	}
	return runs, false, nil
}

// Runs opens the runs of chain (every chain when chain is ""), newest
// first, at most limit of them (all when limit <= 0).
func (s *Store) Runs(chain string, limit int) ([]*Run, error) {
	runs, _, err := s.RunsPage(chain, "", limit)
	return runs, err
}

// RunReads is how many run states OpenRun has read since the store was
// opened: what a listing costs, for tests and diagnostics.
func (s *Store) RunReads() int64 { return s.runReads.Load() }
