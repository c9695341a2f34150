package pipeline

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"github.com/decreehq/decree/pkg/checkpoint"
	"github.com/decreehq/decree/pkg/fsutil"
	"github.com/decreehq/decree/pkg/layout"
)

// A lane is one parallel chain's tree (lanes.go explains when chains get
// one). The tree lives as manifests over the project's object store, not
// as files: the lane's worker (a replica worker) syncs its workspace to
// the lane's manifest before every routine and sends back its own after,
// so a checkpoint is a copy of the manifest, a revert is setting it back,
// and a diff reads both sides from the store. Everything a lane needs
// after a restart is in .decree/lanes/<chain>/:
//
//	lane.json   the chain, when it opened, whether it runs a conflicting
//	            chain again (retry_of)
//	base.json   the project tree when the chain started (the merge base)
//	tree.json   the lane's tree now, written after every routine
//	merge.json  the merge journal, once the chain finished (merge.go)
type lane struct {
	chain   string
	dir     string
	info    laneInfo
	base    *checkpoint.Manifest
	baseSum string

	mu      sync.Mutex
	tree    *checkpoint.Manifest
	msgID   string
	attempt int
	merging bool
}

// laneInfo is lane.json.
type laneInfo struct {
	Chain   string    `json:"chain"`
	Opened  time.Time `json:"opened"`
	RetryOf string    `json:"retry_of,omitempty"`
	// Retry counts merge conflicts behind this run of the change: 1 for a
	// chain requeued after its first conflict.
	Retry int `json:"retry,omitempty"`
	// Root is the file name of the chain's first message (in done/ once
	// it ran), for a requeue or a dead letter after a conflict.
	Root string `json:"root,omitempty"`
}

const (
	lanesDir     = "lanes"
	laneInfoFile = "lane.json"
	laneBaseFile = "base.json"
	laneTreeFile = "tree.json"
)

// lanesRoot is .decree/lanes.
func (p *Pipeline) lanesRoot() string { return layout.Path(p.d.Store.Root(), lanesDir) }

// createLane writes a new lane for chain starting from base.
func (p *Pipeline) createLane(info laneInfo, base *checkpoint.Manifest) (*lane, error) {
	dir := filepath.Join(p.lanesRoot(), info.Chain)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("open a lane for chain %s: %w", info.Chain, err)
	}
	l := &lane{chain: info.Chain, dir: dir, info: info, base: base, tree: base}
	data, err := checkpoint.MarshalManifest(base)
	if err != nil {
		return nil, err
	}
	l.baseSum = digest(data)
	if err := fsutil.WriteFileAtomic(filepath.Join(dir, laneBaseFile), data, 0o644); err != nil {
		return nil, fmt.Errorf("open a lane for chain %s: %w", info.Chain, err)
	}
	if err := fsutil.WriteFileAtomic(filepath.Join(dir, laneTreeFile), data, 0o644); err != nil {
		return nil, fmt.Errorf("open a lane for chain %s: %w", info.Chain, err)
	}
	// lane.json last: a directory without it is a lane that never opened.
	js, _ := json.MarshalIndent(info, "", "  ")
	if err := fsutil.WriteFileAtomic(filepath.Join(dir, laneInfoFile), append(js, '\n'), 0o644); err != nil {
		return nil, fmt.Errorf("open a lane for chain %s: %w", info.Chain, err)
	}
	return l, nil
}

// loadLane reads the lane in dir.
func loadLane(dir string) (*lane, error) {
	data, err := os.ReadFile(filepath.Join(dir, laneInfoFile))
	if err != nil {
		return nil, err
	}
	var info laneInfo
	if err := json.Unmarshal(data, &info); err != nil {
		return nil, fmt.Errorf("read %s: %w", filepath.Join(dir, laneInfoFile), err)
	}
	l := &lane{chain: info.Chain, dir: dir, info: info}
	raw, err := os.ReadFile(filepath.Join(dir, laneBaseFile))
	if err != nil {
		return nil, err
	}
	l.baseSum = digest(raw)
	if l.base, err = checkpoint.ReadManifest(filepath.Join(dir, laneBaseFile)); err != nil {
		return nil, err
	}
	if l.tree, err = checkpoint.ReadManifest(filepath.Join(dir, laneTreeFile)); err != nil {
		return nil, err
	}
	return l, nil
}

// loadLanes reads every lane on disk, oldest first. A directory without
// lane.json (a lane cut short while opening) is removed.
func (p *Pipeline) loadLanes() ([]*lane, error) {
	ents, err := os.ReadDir(p.lanesRoot())
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list .decree/lanes: %w", err)
	}
	var out []*lane
	for _, de := range ents {
		if !de.IsDir() {
			continue
		}
		dir := filepath.Join(p.lanesRoot(), de.Name())
		l, err := loadLane(dir)
		if errors.Is(err, fs.ErrNotExist) {
			if _, ierr := os.Stat(filepath.Join(dir, laneInfoFile)); errors.Is(ierr, fs.ErrNotExist) {
				_ = os.RemoveAll(dir)
				continue
			}
		}
		if err != nil {
			return nil, fmt.Errorf("read lane %s: %w; fix or remove .decree/lanes/%s", de.Name(), err, de.Name())
		}
		out = append(out, l)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].info.Opened.Before(out[j].info.Opened) })
	return out, nil
}

// current returns the lane's tree now.
func (l *lane) current() *checkpoint.Manifest {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.tree
}

// setTree makes m the lane's tree, durably.
func (l *lane) setTree(m *checkpoint.Manifest) error {
	data, err := checkpoint.MarshalManifest(m)
	if err != nil {
		return err
	}
	if err := fsutil.WriteFileAtomic(filepath.Join(l.dir, laneTreeFile), data, 0o644); err != nil {
		return fmt.Errorf("record the tree of lane %s: %w", l.chain, err)
	}
	l.mu.Lock()
	l.tree = m
	l.mu.Unlock()
	return nil
}

// setRunning records what the lane runs now, for status.
func (l *lane) setRunning(id string, attempt int) {
	l.mu.Lock()
	l.msgID, l.attempt = id, attempt
	l.mu.Unlock()
}

// remove deletes the lane's directory: its chain is merged or given up.
func (l *lane) remove() error {
	if err := os.RemoveAll(l.dir); err != nil {
		return fmt.Errorf("remove lane %s: %w", l.chain, err)
	}
	return nil
}

// laneOf returns the open lane of chain, or nil.
func (p *Pipeline) laneOf(chain string) *lane {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.lanes[chain]
}

// laneChains lists the chains that have a lane, sorted.
func (p *Pipeline) laneChains() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]string, 0, len(p.lanes))
	for c := range p.lanes {
		out = append(out, c)
	}
	sort.Strings(out)
	return out
}

// lanesOpen counts the lanes, running and merging.
func (p *Pipeline) lanesOpen() (running, merging int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, l := range p.lanes {
		l.mu.Lock()
		if l.merging {
			merging++
		} else {
			running++
		}
		l.mu.Unlock()
	}
	return running, merging
}

func digest(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
