package checkpoint

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/decreehq/decree/pkg/checkpoint/ignore"
)

// bufferLimit is the largest file hashed from memory; larger files are
// streamed through the hash and the compressor.
const bufferLimit = 4 << 20

// racyWindow is far above the timestamp granularity of local Linux file
// systems (a scheduler tick) and that of most network ones (1 s).
const racyWindow = 2 * time.Second

type hashJob struct {
	rel string
	abs string
	key statKey
}

type resultKind int

const (
	hashed resultKind = iota
	cacheHit
	symlink
)

type hashResult struct {
	rel   string
	entry Entry
	sum   [32]byte
	key   statKey
	bytes int64
	kind  resultKind
	store bool
	err   error
}

// Snapshot walks root and returns its manifest, storing the content of every
// file not yet in the store. Unchanged files (same stat data as in the stat
// cache) are not read. The manifest must not be modified: for a root
// served by Serve it is shared with later snapshots until the tree changes.
func (c *Checkpointer) Snapshot(ctx context.Context, root string) (*Manifest, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.snapshot(ctx, root, true)
}

// snapshot takes root's manifest: from the watched state when a watcher
// serves root (see Serve), else by walking the tree.
func (c *Checkpointer) snapshot(ctx context.Context, root string, store bool) (*Manifest, error) {
	if ws := c.watching(root); ws != nil {
		m, err := c.watchedSnapshot(ctx, ws)
		if err == nil || !errors.Is(err, errWatchFailed) {
			return m, err
		}
		c.log.Warn("checkpoint: the file watcher stopped; every snapshot walks the tree", "root", ws.root, "err", err)
	}
	return c.walkSnapshot(ctx, root, store, nil)
}

// walkHooks let a full walk prime a watched state: every directory is
// watched before it is read, and the rules and stat data of everything
// found are kept.
type walkHooks struct {
	enter   func(dir string) error
	visited func(dir string, rules *ignore.Rules)
	keys    map[string]statKey  // regular files' stat data
	racy    map[string]struct{} // files hashed while racily clean
	linked  map[string]struct{} // files with more than one hard link
}

// walkSnapshot walks root. With store unset it only hashes: nothing is
// added to the store, and the stat cache is used but not updated (a cache
// entry promises that its blob is stored). With h set, h's callbacks see
// every directory and h receives every file's stat data.
func (c *Checkpointer) walkSnapshot(ctx context.Context, root string, store bool, h *walkHooks) (*Manifest, error) {
	fi, err := os.Stat(root)
	if err != nil {
		return nil, fmt.Errorf("snapshot: project root: %w", err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("snapshot: project root %s is not a directory", root)
	}
	if abs, err := filepath.Abs(root); err == nil {
		root = abs
	}
	// The cache loads while the walk starts reading directories.
	var cache *statCache
	cacheReady := make(chan struct{})
	go func() {
		defer close(cacheReady)
		var err error
		if cache, err = loadStatCache(c.cachePath, root); err != nil {
			c.log.Warn("checkpoint stat cache unusable, rehashing the tree", "err", err)
		}
	}()
	defer func() { <-cacheReady }()
	// Racy-clean rule: a file modified less than racyWindow before the scan
	// began may change again within one timestamp tick without its stat
	// data changing, so its hash is used but not cached.
	stamp := time.Now().Add(-racyWindow).UnixNano()

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	m := &Manifest{ExactPerms: true}
	// The next cache is built only when something changed: hits are just
	// counted, fresh entries collected.
	var fresh, hits []string
	var freshEntries, hitEntries []cacheEntry
	hitsReady := false
	var recordAll func([]hashResult)
	var recordLocked func(hashResult)
	var (
		st       Stats
		mu       sync.Mutex // guards m, fresh, st, firstErr
		firstErr error
	)
	record := func(r hashResult) { recordAll([]hashResult{r}) }
	recordAll = func(rs []hashResult) {
		mu.Lock()
		defer mu.Unlock()
		if m.Files == nil {
			m.Files = make(map[string]Entry, cache.n+len(rs))
		}
		for _, r := range rs {
			recordLocked(r)
		}
	}
	recordLocked = func(r hashResult) {
		if r.err != nil {
			if firstErr == nil {
				firstErr = r.err
				cancel()
			}
			return
		}
		m.Files[r.rel] = r.entry
		if r.kind != symlink {
			m.setPerm(r.rel, r.entry.Mode, fs.FileMode(r.key.mode))
			if h != nil {
				h.keys[r.rel] = r.key
				if r.kind == hashed && r.key.mtime >= stamp {
					h.racy[r.rel] = struct{}{}
				}
			}
		}
		switch r.kind {
		case cacheHit:
			st.CacheHits++
			if !hitsReady {
				hits = make([]string, 0, cache.n)
				hitEntries = make([]cacheEntry, 0, cache.n)
				hitsReady = true
			}
			hits = append(hits, r.rel)
			hitEntries = append(hitEntries, cacheEntry{key: r.key, sum: r.entry.SHA256})
		case hashed:
			st.Hashed++
			st.HashedBytes += r.bytes
			if r.store {
				st.Stored++
			}
			if r.key.mtime < stamp && store {
				fresh = append(fresh, r.rel)
				freshEntries = append(freshEntries, cacheEntry{key: r.key, sum: r.entry.SHA256})
			}
		}
	}
	var pw *packWriter
	if store {
		pw = c.store.newPackWriter()
		defer pw.abort()
	}
	jobs := make(chan hashJob, 4*c.workers)
	var wg sync.WaitGroup
	for i := 0; i < c.workers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range jobs {
				if ctx.Err() == nil {
					record(c.hashOne(j, pw))
				}
			}
		}()
	}
	var topts ignore.TreeOptions
	if h != nil {
		topts.Enter, topts.Visited = h.enter, h.visited
	}
	walkErr := ignore.WalkTree(ctx, root, c.workers, topts, func(batch []ignore.File) error {
		<-cacheReady
		dp := resultsPool.Get().(*[]hashResult)
		done := (*dp)[:0]
		defer func() {
			clear(done)
			*dp = done[:0]
			resultsPool.Put(dp)
		}()
		dir := ""
		if i := strings.LastIndexByte(batch[0].Rel, '/'); i >= 0 {
			dir = batch[0].Rel[:i]
		}
		cur := cache.cursor(dir)
		for _, f := range batch {
			rel, info := f.Rel, f.Info
			if info.Mode()&fs.ModeSymlink != 0 {
				abs := filepath.Join(root, filepath.FromSlash(rel))
				target, err := os.Readlink(abs)
				if err != nil {
					return fmt.Errorf("snapshot: read symlink %s: %w", abs, err)
				}
				sum := sha256.Sum256([]byte(target))
				done = append(done, hashResult{rel: rel, entry: Entry{SHA256: hex.EncodeToString(sum[:]), Size: int64(len(target)), Mode: ModeSymlink, Link: target}, kind: symlink})
				continue
			}
			key := keyOf(info)
			if h != nil && linkCount(info) > 1 {
				mu.Lock()
				h.linked[rel] = struct{}{}
				mu.Unlock()
			}
			if ck, sum, ok := cur.find(rel[len(rel)-len(info.Name()):]); ok && ck == key {
				done = append(done, hashResult{rel: rel, entry: Entry{SHA256: sum, Size: key.size, Mode: ModeOf(info.Mode())}, key: key, kind: cacheHit})
				continue
			}
			select {
			case jobs <- hashJob{rel: rel, abs: filepath.Join(root, filepath.FromSlash(rel)), key: key}:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		recordAll(done)
		return nil
	})
	close(jobs)
	wg.Wait()
	changed := st.Hashed > 0
	if firstErr != nil {
		return nil, firstErr
	}
	if walkErr != nil {
		return nil, fmt.Errorf("snapshot %s: %w", root, walkErr)
	}
	if m.Files == nil {
		m.Files = map[string]Entry{}
	}
	st.Files = len(m.Files)
	st.Walked = true
	if !store {
		return m, nil
	}
	c.stats = st
	if err := pw.finish(!c.noSync); err != nil {
		return nil, fmt.Errorf("snapshot %s: %w", root, err)
	}
	<-cacheReady
	if c.cachePath != "" && (changed || st.CacheHits != cache.n) {
		next := make(map[string]cacheEntry, len(hits)+len(fresh))
		for i, p := range hits {
			next[p] = hitEntries[i]
		}
		for i, p := range fresh {
			next[p] = freshEntries[i]
		}
		if err := saveStatCache(c.cachePath, root, next); err != nil {
			c.log.Warn("checkpoint stat cache not saved; the next snapshot rereads files", "err", err)
		}
	}
	return m, nil
}

// resultsPool holds the per-directory result slices of the walk.
var resultsPool = sync.Pool{New: func() any { return new([]hashResult) }}

var blobBufPool = sync.Pool{New: func() any { return new(bytes.Buffer) }}

var bufPool = sync.Pool{New: func() any { b := make([]byte, 0, 64<<10); return &b }}

// hashOne reads, hashes and stores one regular file.
func (c *Checkpointer) hashOne(j hashJob, pw *packWriter) hashResult {
	r := hashResult{rel: j.rel, key: j.key}
	fail := func(err error) hashResult {
		r.err = fmt.Errorf("snapshot: read %s: %w (make it readable, or list it in .decreeignore)", j.abs, err)
		return r
	}
	if j.key.size > bufferLimit {
		var sum string
		var size int64
		var stored bool
		var err error
		if pw != nil {
			sum, size, stored, err = c.store.putFile(j.abs, !c.noSync)
		} else {
			sum, size, err = HashFile(j.abs)
		}
		if err != nil {
			return fail(err)
		}
		raw, _ := hex.DecodeString(sum)
		copy(r.sum[:], raw)
		r.bytes = size
		r.store = stored
		r.entry = Entry{SHA256: sum, Size: size, Mode: ModeOf(fs.FileMode(j.key.mode))}
		return r
	}
	f, err := os.Open(j.abs)
	if err != nil {
		return fail(err)
	}
	bp := bufPool.Get().(*[]byte)
	defer bufPool.Put(bp)
	buf := (*bp)[:0]
	if int64(cap(buf)) < j.key.size+512 {
		buf = make([]byte, 0, j.key.size+512)
	}
	for {
		n, err := f.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			break
		}
		if err != nil {
			f.Close()
			return fail(err)
		}
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
	}
	f.Close()
	*bp = buf
	r.sum = sha256.Sum256(buf)
	sum := hex.EncodeToString(r.sum[:])
	r.bytes = int64(len(buf))
	if pw != nil && !c.store.Has(sum) {
		cb := blobBufPool.Get().(*bytes.Buffer)
		stored, err := pw.add(r.sum, compressBlob(buf, cb))
		blobBufPool.Put(cb)
		if err != nil {
			r.err = fmt.Errorf("snapshot %s: %w", j.rel, err)
			return r
		}
		r.store = stored
	}
	if int64(len(buf)) != j.key.size {
		r.key.mtime = 1<<63 - 1 // changed while reading: never cache
	}
	r.entry = Entry{SHA256: sum, Size: int64(len(buf)), Mode: ModeOf(fs.FileMode(j.key.mode))}
	return r
}

// HashFile returns the hex SHA-256 and size of a file, streamed.
func HashFile(path string) (string, int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", 0, err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return "", 0, err
	}
	return hex.EncodeToString(h.Sum(nil)), n, nil
}

// withTracked returns tree, or a copy of it with the paths addTracked
// adds when something of tracked is missing from it (deleted, or hidden
// by an ignore rule): tree itself is never modified (a watched snapshot
// shares it).
func (c *Checkpointer) withTracked(root string, tracked, tree *Manifest, store bool) (*Manifest, error) {
	paths := tracked.Files
	if tree.delta != nil && tree.base.Value() == tracked {
		paths = nil // only the paths of delta can be missing
		for p := range tree.delta {
			if _, ok := tree.Files[p]; !ok {
				if _, was := tracked.Files[p]; was {
					return c.withTrackedCopy(root, tracked, tree, store)
				}
			}
		}
	}
	for p := range paths {
		if _, ok := tree.Files[p]; !ok {
			return c.withTrackedCopy(root, tracked, tree, store)
		}
	}
	return tree, nil
}

func (c *Checkpointer) withTrackedCopy(root string, tracked, tree *Manifest, store bool) (*Manifest, error) {
	after := &Manifest{Files: maps.Clone(tree.Files), Perms: maps.Clone(tree.Perms), ExactPerms: tree.ExactPerms}
	return after, c.addTracked(root, tracked, after, store)
}

// addTracked adds to m every path of tracked that m lacks but that still
// exists as a file or symlink: as in git, ignore rules only hide untracked
// files, so a routine that adds a tracked file to .gitignore does not make
// it look deleted. With store set, contents go to the store.
func (c *Checkpointer) addTracked(root string, tracked, m *Manifest, store bool) error {
	for p := range tracked.Files {
		if _, ok := m.Files[p]; ok {
			continue
		}
		loc, err := locate(root, p)
		if err != nil || loc.info == nil || loc.viaLink != "" {
			continue // gone, or no longer reachable without a symlink
		}
		if !loc.info.Mode().IsRegular() && loc.info.Mode()&fs.ModeSymlink == 0 {
			continue
		}
		e, perm, exists, err := readEntry(loc.abs)
		if err != nil {
			return fmt.Errorf("snapshot: read %s: %w (make it readable)", p, err)
		}
		if !exists {
			continue
		}
		if store && e.Mode != ModeSymlink && !c.store.Has(e.SHA256) {
			data, err := os.ReadFile(loc.abs)
			if err != nil {
				return fmt.Errorf("snapshot: read %s: %w", p, err)
			}
			sum := sha256.Sum256(data)
			if hex.EncodeToString(sum[:]) != e.SHA256 {
				return fmt.Errorf("snapshot: %s changed while being read; try again", p)
			}
			if err := c.store.Put(e.SHA256, data); err != nil {
				return fmt.Errorf("snapshot %s: %w", p, err)
			}
		}
		m.Files[p] = e
		m.setPerm(p, e.Mode, perm)
	}
	return nil
}
