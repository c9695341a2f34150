package checkpoint

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"
	"weak"

	"github.com/decreehq/decree/pkg/checkpoint/ignore"
	"github.com/decreehq/decree/pkg/treewatch"
)

// Serve keeps the state of the tree at root between snapshots while ctx
// lasts, and learns what changed from the kernel (package treewatch:
// inotify on Linux), so that a snapshot costs O(changes), not O(tree).
// A controller that stays up calls it for its project root; snapshots of
// other roots walk as before. It returns when ctx ends, after saving the
// stat cache.
//
// Correctness comes first, so a snapshot walks the whole tree (through the
// stat cache) whenever the watched state cannot be trusted: the first
// snapshot after Serve starts (a change made while nothing watched is
// seen), after the kernel dropped events (IN_Q_OVERFLOW) or the root was
// moved. Where no watcher can be set up (another OS than Linux, a network
// or FUSE file system, the inotify watch limit) every snapshot walks, as
// without Serve, and a warning is logged once.
//
// Between those walks a snapshot lstats only the paths events named:
// a changed file is hashed again, a new or renamed directory is walked
// (its watch is added before it is read, so a file created in it
// meanwhile is either read or reported), a deleted one dropped with
// everything below, and a changed .gitignore or .decreeignore walks its
// directory again under the new rules. The racily-clean rule still holds:
// a file hashed less than two seconds after its mtime is hashed again at
// the next snapshot. A file with more than one hard link is looked at
// (lstat) at every snapshot: a write through another name, maybe outside
// the tree, raises no event in its directory. Limits are the kernel's (see
// package treewatch): changes through a shared mmap or made by another
// host of a network file system (refused: such roots are walked) raise no
// event.
func (c *Checkpointer) Serve(ctx context.Context, root string) error {
	abs, err := filepath.Abs(root)
	if err != nil {
		return fmt.Errorf("checkpoint: serve %s: %w", root, err)
	}
	ws := &watchState{root: abs}
	c.mu.Lock()
	if c.watched == nil {
		c.watched = map[string]*watchState{}
	}
	if c.watched[abs] != nil {
		c.mu.Unlock()
		return fmt.Errorf("checkpoint: %s is already served", abs)
	}
	c.watched[abs] = ws
	c.mu.Unlock()
	<-ctx.Done()
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.watched, abs)
	ws.save(c)
	ws.stop()
	return nil
}

// errWatchFailed marks an error of the watcher itself: the snapshot falls
// back to a walk.
var errWatchFailed = errors.New("file watcher failed")

// watchState is the tree of one served root as of its last snapshot.
type watchState struct {
	root   string
	w      *treewatch.Watcher // nil until primed, or after it failed
	failed bool               // no watcher can serve: walk every time
	m      *Manifest          // files and permission bits
	keys   map[string]statKey // stat data of every regular file in m
	racy   map[string]struct{}
	// linked are the files with more than one hard link: a write through
	// another name (which may lie outside the tree) raises no event here,
	// so they are looked at (lstat) at every snapshot.
	linked map[string]struct{}
	dirs   map[string]*ignore.Rules // tracked directories -> their rules
	dirty  bool                     // the saved stat cache is behind keys
	// shared says m has been handed out: it is never modified again, the
	// next change works on a copy (copy on write).
	shared bool
	// added and removed are the paths that entered or left m since it
	// was last handed out, to keep m.order sorted without a sort.
	added, removed map[string]struct{}
}

// watching returns the state serving root, or nil. Called with c.mu held.
func (c *Checkpointer) watching(root string) *watchState {
	if len(c.watched) == 0 {
		return nil
	}
	if abs, err := filepath.Abs(root); err == nil {
		root = abs
	}
	ws := c.watched[root]
	if ws == nil || ws.failed {
		return nil
	}
	return ws
}

func (ws *watchState) stop() {
	if ws.w != nil {
		ws.w.Close()
		ws.w = nil
	}
	ws.m = nil
}

// fail gives up watching.
func (ws *watchState) fail(err error) error {
	ws.stop()
	ws.failed = true
	return fmt.Errorf("%w: %w", errWatchFailed, err)
}

// save writes the stat cache from the state, if it is behind.
func (ws *watchState) save(c *Checkpointer) {
	if !ws.dirty || ws.m == nil || c.cachePath == "" {
		return
	}
	entries := make(map[string]cacheEntry, len(ws.keys))
	for p, k := range ws.keys {
		if _, racy := ws.racy[p]; !racy {
			entries[p] = cacheEntry{key: k, sum: ws.m.Files[p].SHA256}
		}
	}
	if err := saveStatCache(c.cachePath, ws.root, entries); err != nil {
		c.log.Warn("checkpoint stat cache not saved; the next snapshot rereads files", "err", err)
		return
	}
	ws.dirty = false
}

// watchedSnapshot brings the state up to date and returns a copy of its
// manifest. Called with c.mu held.
func (c *Checkpointer) watchedSnapshot(ctx context.Context, ws *watchState) (*Manifest, error) {
	if ws.m != nil {
		ch, err := ws.w.Drain()
		if err != nil {
			return nil, ws.fail(err)
		}
		if !ch.Overflow {
			err := c.update(ctx, ws, ch.Paths)
			if err == nil {
				return ws.manifest(), nil
			}
			ws.m = nil // half updated: never used again
			if errors.Is(err, errWatchFailed) || ctx.Err() != nil {
				return nil, err
			}
			// Half updated (say a directory vanished while it was
			// read): walk.
			c.log.Info("checkpoint: walking the tree", "root", ws.root, "after", err)
		} else {
			c.log.Info("checkpoint: file events were lost; walking the tree", "root", ws.root)
		}
	}
	if err := c.prime(ctx, ws); err != nil {
		return nil, err
	}
	return ws.manifest(), nil
}

// manifest hands out m, which is not modified afterwards (see shared),
// with its paths in order.
func (ws *watchState) manifest() *Manifest {
	m := ws.m
	if m.order == nil || len(ws.added) > 0 || len(ws.removed) > 0 {
		m.order = mergeOrder(m.order, ws.added, ws.removed, m)
	}
	ws.added, ws.removed = nil, nil
	ws.shared = true
	return m
}

// own makes m safe to modify: a copy if it has been handed out.
func (ws *watchState) own() {
	if !ws.shared {
		return
	}
	ws.m = &Manifest{Files: maps.Clone(ws.m.Files), Perms: maps.Clone(ws.m.Perms), ExactPerms: true, order: ws.m.order,
		base: weak.Make(ws.m), delta: map[string]struct{}{}}
	ws.shared = false
}

// mergeOrder returns the sorted paths of m from order (those of m before
// the changes) and the paths added and removed since; a nil order is
// sorted afresh.
func mergeOrder(order []string, added, removed map[string]struct{}, m *Manifest) []string {
	if order == nil {
		return m.sortedPaths()
	}
	add := make([]string, 0, len(added))
	for p := range added {
		add = append(add, p)
	}
	sort.Strings(add)
	out := make([]string, 0, len(m.Files))
	for _, p := range order {
		for len(add) > 0 && add[0] < p {
			out = append(out, add[0])
			add = add[1:]
		}
		if _, gone := removed[p]; !gone {
			out = append(out, p)
		}
	}
	out = append(out, add...)
	if len(out) != len(m.Files) {
		return m.sortedPaths() // never expected; stay correct
	}
	return out
}

// prime walks the whole tree, watching every directory before reading it.
func (c *Checkpointer) prime(ctx context.Context, ws *watchState) error {
	// A fresh watcher: the walk watches every directory again, and no
	// stale watch (a directory moved out of the tree) is left over.
	ws.stop()
	w, err := treewatch.New(ws.root, treewatch.Options{MaxWatches: c.maxWatches})
	if err != nil {
		return ws.fail(err)
	}
	ws.w = w
	var mu sync.Mutex
	dirs := map[string]*ignore.Rules{}
	h := &walkHooks{
		enter: ws.w.Add,
		visited: func(dir string, rules *ignore.Rules) {
			mu.Lock()
			dirs[dir] = rules
			mu.Unlock()
		},
		keys:   map[string]statKey{},
		racy:   map[string]struct{}{},
		linked: map[string]struct{}{},
	}
	m, err := c.walkSnapshot(ctx, ws.root, true, h)
	if errors.Is(err, treewatch.ErrLimit) {
		return ws.fail(err)
	}
	if err != nil {
		return err
	}
	ws.m, ws.keys, ws.racy, ws.linked, ws.dirs, ws.dirty = m, h.keys, h.racy, h.linked, dirs, false
	ws.shared, ws.added, ws.removed = false, nil, nil
	return nil
}

// update applies the changes at paths (and rehashes the racily clean
// files) to the state.
func (c *Checkpointer) update(ctx context.Context, ws *watchState, paths []string) error {
	stamp := time.Now().Add(-racyWindow).UnixNano()
	u := &updater{c: c, ws: ws, stamp: stamp, rescanned: map[string]bool{}}
	// A changed ignore file walks its directory again under the new rules
	// (before anything in it is looked at with the old ones). Only events
	// say so: an ignore file changed after its rules were read raises one.
	for _, p := range paths {
		if n := path.Base(p); n == ignore.GitIgnoreFile || n == ignore.DecreeIgnoreFile {
			u.rescans = append(u.rescans, parentDir(p))
		}
	}
	sort.Strings(u.rescans)
	for p := range ws.racy {
		paths = append(paths, p)
	}
	for p := range ws.linked {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	paths = compactStrings(paths)
	u.start(ctx)
	defer u.abort()
	for _, p := range paths {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := u.apply(ctx, p); err != nil {
			return err
		}
	}
	return u.finish()
}

// updater holds one update's hashing workers.
type updater struct {
	c         *Checkpointer
	ws        *watchState
	stamp     int64
	rescans   []string        // directories to walk again (ignore files changed)
	rescanned map[string]bool // directories walked again
	pw        *packWriter
	jobs      chan hashJob
	wg        sync.WaitGroup
	mu        sync.Mutex
	err       error
	cancel    context.CancelFunc
	st        Stats
	closed    bool
}

func (u *updater) start(ctx context.Context) {
	ctx, u.cancel = context.WithCancel(ctx)
	u.pw = u.c.store.newPackWriter()
	u.jobs = make(chan hashJob, 4*u.c.workers)
	for i := 0; i < u.c.workers; i++ {
		u.wg.Add(1)
		go func() {
			defer u.wg.Done()
			for j := range u.jobs {
				if ctx.Err() == nil {
					u.record(u.c.hashOne(j, u.pw))
				}
			}
		}()
	}
}

func (u *updater) record(r hashResult) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if r.err != nil {
		if u.err == nil {
			u.err = r.err
			u.cancel()
		}
		return
	}
	u.ws.put(r.rel, r.entry, r.key)
	if r.key.mtime >= u.stamp {
		u.ws.racy[r.rel] = struct{}{}
	}
	u.st.Hashed++
	u.st.HashedBytes += r.bytes
	if r.store {
		u.st.Stored++
	}
}

// drain stops the workers.
func (u *updater) drain() {
	if !u.closed {
		u.closed = true
		close(u.jobs)
		u.wg.Wait()
	}
}

func (u *updater) abort() {
	u.cancel()
	u.drain()
	u.pw.abort()
}

func (u *updater) finish() error {
	u.drain()
	if u.err != nil {
		return u.err
	}
	if err := u.pw.finish(!u.c.noSync); err != nil {
		return fmt.Errorf("snapshot %s: %w", u.ws.root, err)
	}
	u.st.Files = len(u.ws.m.Files)
	u.st.CacheHits = u.st.Files - u.st.Hashed
	u.c.stats = u.st
	return nil
}

// covered reports whether p is (below) a directory already walked again.
func (u *updater) covered(p string) bool {
	for q := p; ; q = parentDir(q) {
		if u.rescanned[q] {
			return true
		}
		if q == "" {
			return false
		}
	}
}

// apply brings path p of the state in line with the tree.
func (u *updater) apply(ctx context.Context, p string) error {
	ws := u.ws
	for len(u.rescans) > 0 && u.rescans[0] <= p {
		// Ignore files' directories, in order, before the paths below them.
		d := u.rescans[0]
		u.rescans = u.rescans[1:]
		fi, err := os.Lstat(filepath.Join(ws.root, filepath.FromSlash(d)))
		if err == nil && fi.IsDir() && !u.covered(d) { // else its parent's event drops it
			if _, tracked := ws.dirs[d]; tracked {
				if err := u.rescan(ctx, d); err != nil {
					return err
				}
			}
		}
	}
	if u.covered(p) {
		return nil
	}
	rules, tracked := ws.dirs[parentDir(p)]
	if !tracked {
		return nil // inside an ignored or vanished directory
	}
	abs := filepath.Join(ws.root, filepath.FromSlash(p))
	fi, err := os.Lstat(abs)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("snapshot: stat %s: %w (make it readable or ignore it in .decreeignore)", abs, err)
	}
	var typ fs.FileMode
	if err == nil {
		typ = fi.Mode().Type()
	}
	switch {
	case err == nil && typ.IsDir() && !rules.Ignored(p, true):
		// New, renamed in, or replaced: walk it.
		return u.rescan(ctx, p)
	case err == nil && typ.IsRegular() && !rules.Ignored(p, false):
		key := keyOf(fi)
		u.mu.Lock()
		ws.setLinked(p, fi)
		if _, wasDir := ws.dirs[p]; wasDir {
			ws.drop(p)
			ws.w.Remove(p)
		}
		old, ok := ws.keys[p]
		_, racy := ws.racy[p]
		u.mu.Unlock()
		if ok && old == key && !racy {
			return nil
		}
		return u.hash(ctx, p, abs, key)
	case err == nil && typ&fs.ModeSymlink != 0 && !rules.Ignored(p, false):
		target, err := os.Readlink(abs)
		if err != nil {
			return fmt.Errorf("snapshot: read symlink %s: %w", abs, err)
		}
		u.mu.Lock()
		if _, wasDir := ws.dirs[p]; wasDir {
			ws.w.Remove(p)
		}
		ws.drop(p)
		ws.putLink(p, target)
		u.mu.Unlock()
	default:
		// Gone, ignored, or a socket, FIFO or device: not tracked.
		u.mu.Lock()
		if _, wasDir := ws.dirs[p]; wasDir {
			ws.w.Remove(p)
		}
		ws.drop(p)
		u.mu.Unlock()
	}
	return nil
}

func (u *updater) hash(ctx context.Context, rel, abs string, key statKey) error {
	select {
	case u.jobs <- hashJob{rel: rel, abs: abs, key: key}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// rescan walks directory d again (new, renamed, or its ignore rules
// changed), watching every directory below it before reading it; the
// stat data of the state spares reading unchanged files.
func (u *updater) rescan(ctx context.Context, d string) error {
	ws := u.ws
	u.rescanned[d] = true
	// What was below d, to spare rereading unchanged files.
	old := map[string]cacheEntry{}
	u.mu.Lock()
	for p, k := range ws.keys {
		if d == "" || strings.HasPrefix(p, d+"/") {
			if _, racy := ws.racy[p]; !racy {
				old[p] = cacheEntry{key: k, sum: ws.m.Files[p].SHA256}
			}
		}
	}
	oldDirs := ws.subdirs(d)
	ws.drop(d)
	u.mu.Unlock()
	var parent *ignore.Rules
	if d != "" {
		parent = ws.dirs[parentDir(d)]
	}
	var mu sync.Mutex
	opts := ignore.TreeOptions{Start: d, Parent: parent, Enter: ws.w.Add, Visited: func(dir string, rules *ignore.Rules) {
		mu.Lock()
		ws.dirs[dir] = rules
		mu.Unlock()
	}}
	err := ignore.WalkTree(ctx, ws.root, u.c.workers, opts, func(batch []ignore.File) error {
		for _, f := range batch {
			abs := filepath.Join(ws.root, filepath.FromSlash(f.Rel))
			if f.Info.Mode()&fs.ModeSymlink != 0 {
				target, err := os.Readlink(abs)
				if err != nil {
					return fmt.Errorf("snapshot: read symlink %s: %w", abs, err)
				}
				u.mu.Lock()
				ws.putLink(f.Rel, target)
				u.mu.Unlock()
				continue
			}
			key := keyOf(f.Info)
			u.mu.Lock()
			ws.setLinked(f.Rel, f.Info)
			u.mu.Unlock()
			if o, ok := old[f.Rel]; ok && o.key == key {
				u.mu.Lock()
				ws.put(f.Rel, Entry{SHA256: o.sum, Size: key.size, Mode: ModeOf(fs.FileMode(key.mode))}, key)
				u.mu.Unlock()
				continue
			}
			if err := u.hash(ctx, f.Rel, abs, key); err != nil {
				return err
			}
		}
		return nil
	})
	if errors.Is(err, treewatch.ErrLimit) {
		return ws.fail(err)
	}
	if err != nil {
		return fmt.Errorf("snapshot %s: %w", ws.root, err)
	}
	for _, od := range oldDirs {
		if _, still := ws.dirs[od]; !still {
			ws.w.Remove(od) // now ignored or gone
		}
	}
	return nil
}

// put records a regular file. Called with the updater's lock held.
func (ws *watchState) put(rel string, e Entry, key statKey) {
	if old, ok := ws.m.Files[rel]; ok && old == e && ws.m.PermOf(rel) == fs.FileMode(key.mode)&fs.ModePerm {
		// Unchanged (a racily clean file read again): the manifest
		// handed out stays valid.
		ws.keys[rel] = key
		delete(ws.racy, rel)
		ws.dirty = true
		return
	}
	ws.own()
	ws.note(rel)
	ws.m.Files[rel] = e
	ws.m.setPerm(rel, e.Mode, fs.FileMode(key.mode))
	ws.keys[rel] = key
	delete(ws.racy, rel)
	ws.dirty = true
}

// putLink records a symlink.
func (ws *watchState) putLink(rel, target string) {
	sum := sha256.Sum256([]byte(target))
	ws.own()
	ws.note(rel)
	ws.m.Files[rel] = Entry{SHA256: hex.EncodeToString(sum[:]), Size: int64(len(target)), Mode: ModeSymlink, Link: target}
	ws.m.setPerm(rel, ModeSymlink, 0)
	delete(ws.keys, rel)
	delete(ws.racy, rel)
	delete(ws.linked, rel)
	ws.dirty = true
}

// drop forgets p and, if it was a directory, everything below it (and
// stops watching what was below).
func (ws *watchState) drop(p string) {
	if _, ok := ws.m.Files[p]; ok {
		ws.own()
		ws.forget(p)
		delete(ws.m.Files, p)
		delete(ws.m.Perms, p)
		delete(ws.keys, p)
		delete(ws.racy, p)
		delete(ws.linked, p)
		ws.dirty = true
	}
	if _, isDir := ws.dirs[p]; !isDir {
		return
	}
	prefix := p + "/"
	if p == "" {
		prefix = ""
	}
	for f := range ws.m.Files {
		if strings.HasPrefix(f, prefix) {
			ws.own()
			ws.forget(f)
			delete(ws.m.Files, f)
			delete(ws.m.Perms, f)
			delete(ws.keys, f)
			delete(ws.racy, f)
			delete(ws.linked, f)
			ws.dirty = true
		}
	}
	for d := range ws.dirs {
		if d == p || strings.HasPrefix(d, prefix) {
			delete(ws.dirs, d)
		}
	}
}

// setLinked records whether the regular file rel has other hard links.
func (ws *watchState) setLinked(rel string, fi fs.FileInfo) {
	if linkCount(fi) > 1 {
		ws.linked[rel] = struct{}{}
	} else {
		delete(ws.linked, rel)
	}
}

// note records that rel is about to be in m (it may be already).
func (ws *watchState) note(rel string) {
	ws.touch(rel)
	if _, ok := ws.m.Files[rel]; ok {
		return
	}
	if _, ok := ws.removed[rel]; ok {
		delete(ws.removed, rel)
		return
	}
	if ws.added == nil {
		ws.added = map[string]struct{}{}
	}
	ws.added[rel] = struct{}{}
}

// forget records that rel, in m, is about to leave it.
func (ws *watchState) forget(rel string) {
	ws.touch(rel)
	if _, ok := ws.added[rel]; ok {
		delete(ws.added, rel)
		return
	}
	if ws.removed == nil {
		ws.removed = map[string]struct{}{}
	}
	ws.removed[rel] = struct{}{}
}

// touch records that rel's entry may change (see Manifest.delta).
func (ws *watchState) touch(rel string) {
	if ws.m.delta != nil {
		ws.m.delta[rel] = struct{}{}
	}
}

// subdirs lists d and the tracked directories below it.
func (ws *watchState) subdirs(d string) []string {
	var out []string
	for x := range ws.dirs {
		if x == d || d == "" || strings.HasPrefix(x, d+"/") {
			out = append(out, x)
		}
	}
	return out
}

// parentDir is the directory holding p ("" for the root's entries).
func parentDir(p string) string {
	if i := strings.LastIndexByte(p, '/'); i >= 0 {
		return p[:i]
	}
	return ""
}

func compactStrings(s []string) []string {
	out := s[:0]
	for i, x := range s {
		if i == 0 || x != s[i-1] {
			out = append(out, x)
		}
	}
	return out
}
