package pipeline

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"

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
	path := filepath.Join(p.lanesRoot(), mergesLog)
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("record the merge: %w", err)
	}
	line, _ := json.Marshal(e)
	if _, err := f.Write(append(line, '\n')); err != nil {
		f.Close()
		return fmt.Errorf("record the merge: %w", err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("record the merge: %w", err)
	}
	return f.Close()
}

func (p *Pipeline) readMerges() []mergeEntry {
	f, err := os.Open(filepath.Join(p.lanesRoot(), mergesLog))
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []mergeEntry
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 64<<20)
	for sc.Scan() {
		var e mergeEntry
		if json.Unmarshal(sc.Bytes(), &e) == nil {
			out = append(out, e)
		}
	}
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
