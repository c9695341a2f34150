// Package checkpoint records, diffs and restores the state of a project tree
// without git: decree's built-in checkpoints.
//
// A snapshot walks the tree (skipping .decree/, .git/ and whatever nested
// .gitignore and .decreeignore files exclude, with git's semantics: see
// package ignore), and records a Manifest: SHA-256, size and mode of every
// regular file, and the target of every symlink (never followed). Hashing
// runs in parallel, and a stat cache (size, mtime, ctime, inode, mode per
// path, like git's index) lets a snapshot of an unchanged tree skip reading
// file contents. Every file content a snapshot sees is also kept in a
// content-addressed Store, so that a later Diff can show the old side of a
// change: the manifest alone holds only hashes.
//
// A diff is one text in git's extended unified format ("diff --git",
// "new file mode", "old mode"/"new mode", "GIT binary patch" with literal
// zlib+base85 content for both directions, paths quoted the way git quotes
// them), readable by people and accepted by `git apply` and, for text
// changes, GNU `patch -p1`, forward and reverse. Each section carries an
// "index" line with git's full blob ids of both sides.
//
// Apply parses a diff (github.com/bluekeyes/go-gitdiff, strict, no fuzz),
// computes every resulting file in memory, checks every preimage against the
// blob ids in the diff and every result against the wanted manifest, and
// only then touches the tree. Paths are confined to the root (no "..", no
// absolute paths, no traversal through symlinks). A symlink whose target
// points outside the tree is recorded and restored as a link: decree never
// follows it, and never writes through it.
//
// manifest.json format:
//
//	{
//	  "files": {
//	    "src/main.go": {"sha256": "<64 hex>", "size": 1234, "mode": "644"},
//	    "run.sh":      {"sha256": "<64 hex>", "size": 80,   "mode": "755"},
//	    "latest":      {"sha256": "<sha256 of the target text>", "size": 6,
//	                    "mode": "120000", "link": "v1.2.3"}
//	  }
//	}
//
// Modes are git's: "644" (regular), "755" (owner-executable), "120000"
// (symlink; "link" holds the target and sha256/size describe the target
// text). Finer permission bits are not tracked; applying a change keeps a
// file's other permission bits. Empty directories are not tracked, and
// directories a diff empties are removed (as git apply does).
//
// A Checkpointer serves one project: it owns that project's object store and
// stat cache and serialises its snapshots. The controller keeps one per
// project (e.g. Options{ObjectsDir: ".decree/objects", CachePath:
// ".decree/statcache"}).
package checkpoint

import (
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"sync"
)

// Options configures a Checkpointer.
type Options struct {
	// ObjectsDir holds the content store (required). It should not be inside
	// the tracked tree unless ignored (".decree/" always is).
	ObjectsDir string
	// CachePath is the stat cache file. Empty disables the cache: every
	// snapshot then reads every file.
	CachePath string
	// Workers is the number of files hashed in parallel (default GOMAXPROCS).
	Workers int
	// NoSync skips the one syncfs(2) after a snapshot stored new blobs.
	// Leave it false in production: a crash could otherwise lose blobs that
	// a manifest already refers to.
	NoSync bool
	// Logger receives warnings (e.g. a corrupt stat cache being rebuilt).
	Logger *slog.Logger
}

// Checkpointer takes snapshots, produces diffs and applies them for one
// project. It is safe for concurrent use; snapshots are serialised.
type Checkpointer struct {
	store     *Store
	cachePath string
	workers   int
	noSync    bool
	log       *slog.Logger

	mu    sync.Mutex
	stats Stats
}

// Stats describes the work done by the last snapshot.
type Stats struct {
	Files       int   // entries in the manifest
	CacheHits   int   // files whose hash came from the stat cache
	Hashed      int   // files read and hashed
	HashedBytes int64 // bytes read
	Stored      int   // new blobs written to the store
}

// New returns a Checkpointer.
func New(opts Options) (*Checkpointer, error) {
	if opts.ObjectsDir == "" {
		return nil, errors.New("checkpoint: Options.ObjectsDir is required (e.g. .decree/objects)")
	}
	store, err := OpenStore(opts.ObjectsDir)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: %w", err)
	}
	w := opts.Workers
	if w <= 0 {
		w = runtime.GOMAXPROCS(0)
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Checkpointer{store: store, cachePath: opts.CachePath, workers: w, noSync: opts.NoSync, log: log}, nil
}

// Store returns the content store.
func (c *Checkpointer) Store() *Store { return c.store }

// LastStats returns the statistics of the most recent snapshot.
func (c *Checkpointer) LastStats() Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stats
}
