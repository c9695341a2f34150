package pipeline

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/decreehq/decree/pkg/checkpoint"
	"github.com/decreehq/decree/pkg/fsutil"
)

// Reverting a message that ran in a lane.
//
// Its checkpoint and diff describe its lane's tree, not the project's: the
// project tree also holds every chain merged since. `decreectl revert ID`
// therefore undoes only the message's own paths, checked to be as its
// chain's merge left them; when a later merge changed one of them, the
// error names that merge. A message whose chain was never merged (a
// conflict) has nothing in the project tree to undo.

// mergesLog lists applied merges, one JSON object per line.
const mergesLog = "merges.jsonl"

// mergeEntry is one line of merges.jsonl.
type mergeEntry struct {
	Order int64    `json:"order"`
	Chain string   `json:"chain"`
	Paths []string `json:"paths"`
}

// logMerge appends a merge to merges.jsonl unless its order is there.
func (p *Pipeline) logMerge(e mergeEntry) error {
	for _, old := range p.readMerges() {
		if old.Order == e.Order {
			return nil
		}
	}
	return appendJSONLine(filepath.Join(p.lanesRoot(), mergesLog), e)
}

func (p *Pipeline) readMerges() []mergeEntry {
	var out []mergeEntry
	readJSONLines(filepath.Join(p.lanesRoot(), mergesLog), func(b []byte) {
		var e mergeEntry
		if json.Unmarshal(b, &e) == nil {
			out = append(out, e)
		}
	})
	return out
}

// laneRevertTarget is the manifest reverting lane message id must reach:
// the project tree now with the message's paths as its checkpoint had them.
func (p *Pipeline) laneRevertTarget(ctx context.Context, id string, before *checkpoint.Manifest, paths []string) (*checkpoint.Manifest, error) {
	rec, err := p.d.Store.ReadRunRecord(id)
	if err != nil {
		return nil, err
	}
	if rec.Merge == nil || rec.Merge.Result != "merged" {
		result := "not merged yet"
		if rec.Merge != nil {
			result = rec.Merge.Result
		}
		return nil, fmt.Errorf("%w: %s ran in lane %s, whose change never reached the project tree (merge: %s): there is nothing to revert", ErrConflict, id, rec.Lane, result)
	}
	cur, err := p.d.Checkpoints.Snapshot(ctx, p.d.Store.Root())
	if err != nil {
		return nil, fmt.Errorf("snapshot the project tree: %w", err)
	}
	want := &checkpoint.Manifest{Files: make(map[string]checkpoint.Entry, len(cur.Files)), ExactPerms: cur.ExactPerms}
	for path, e := range cur.Files {
		want.Files[path] = e
		if perm := cur.PermOf(path); perm != e.Mode.Perm() && e.Mode != checkpoint.ModeSymlink {
			setPerm(want, path, perm)
		}
	}
	for _, path := range paths {
		if err := fsutil.CheckRelPath(path); err != nil {
			continue
		}
		if e, ok := before.Files[path]; ok {
			want.Files[path] = e
			if want.Perms != nil {
				delete(want.Perms, path)
			}
			if perm := before.PermOf(path); perm != e.Mode.Perm() && e.Mode != checkpoint.ModeSymlink {
				setPerm(want, path, perm)
			}
		} else {
			delete(want.Files, path)
		}
	}
	return want, nil
}

func setPerm(m *checkpoint.Manifest, path string, perm os.FileMode) {
	if m.Perms == nil {
		m.Perms = map[string]os.FileMode{}
	}
	m.Perms[path] = perm
}

// mergesTouching names the merges after id's own that changed any of paths.
func (p *Pipeline) mergesTouching(id string, paths []string) []string {
	// A message outside lanes: every merge counts.
	var mine int64
	if rec, err := p.d.Store.ReadRunRecord(id); err == nil && rec.Merge != nil {
		mine = rec.Merge.Order
	}
	var out []string
	for _, m := range p.readMerges() {
		if m.Order <= mine {
			continue
		}
		for _, path := range paths {
			if slices.Contains(m.Paths, path) {
				out = append(out, fmt.Sprintf("merge %d (chain %s)", m.Order, m.Chain))
				break
			}
		}
	}
	return out
}

// conflictsLog lists merge conflicts, one JSON object per line.
const conflictsLog = "conflicts.jsonl"

// ConflictRecord is a merge conflict as status shows it.
type ConflictRecord struct {
	Chain      string    `json:"chain"`
	Conflicts  []string  `json:"conflicts"`
	RequeuedAs string    `json:"requeued_as,omitempty"`
	Time       time.Time `json:"time"`
}

func conflictLines(j *mergeJournal) []string {
	if len(j.Conflicts) > 0 {
		return j.Conflicts
	}
	return []string{j.Reason}
}

// logConflict appends c to conflicts.jsonl unless the chain is there (a
// merge finished again after a restart).
func (p *Pipeline) logConflict(c ConflictRecord) error {
	for _, old := range p.MergeConflicts(0) {
		if old.Chain == c.Chain {
			return nil
		}
	}
	if c.Time.IsZero() {
		c.Time = time.Now().UTC()
	}
	return appendJSONLine(filepath.Join(p.lanesRoot(), conflictsLog), c)
}

// MergeConflicts returns the last n merge conflicts (all when n <= 0),
// oldest first.
func (p *Pipeline) MergeConflicts(n int) []ConflictRecord {
	var out []ConflictRecord
	readJSONLines(filepath.Join(p.lanesRoot(), conflictsLog), func(b []byte) {
		var c ConflictRecord
		if json.Unmarshal(b, &c) == nil {
			out = append(out, c)
		}
	})
	if n > 0 && len(out) > n {
		out = out[len(out)-n:]
	}
	return out
}

// appendJSONLine appends v as one line to path, durably.
func appendJSONLine(path string, v any) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("record in %s: %w", filepath.Base(path), err)
	}
	line, _ := json.Marshal(v)
	if _, err := f.Write(append(line, '\n')); err != nil {
		f.Close()
		return fmt.Errorf("record in %s: %w", filepath.Base(path), err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("record in %s: %w", filepath.Base(path), err)
	}
	return f.Close()
}

// readJSONLines calls fn with every line of path (none when it is missing).
func readJSONLines(path string, fn func([]byte)) {
	f, err := os.Open(path)
	if err != nil {
		return
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 64<<20)
	for sc.Scan() {
		fn(sc.Bytes())
	}
}
