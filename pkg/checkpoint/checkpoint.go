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
// or delta zlib+base85 hunks for both directions, paths quoted the way git
// quotes them), readable by people and accepted by `git apply` and, for text
// changes, GNU `patch -p1`, forward and reverse. Each section carries an
// "index" line with git's full blob ids of both sides.
//
// Apply parses a diff (github.com/bluekeyes/go-gitdiff, strict, no fuzz),
// computes every resulting file in memory, checks every preimage against the
// blob ids in the diff and the predicted tree against the wanted manifest,
// and only then touches the tree: a corrupt or truncated diff, a path that
// escapes the root, or a file changed behind decree's back is a clear error
// (wrapping ErrCorruptDiff, fsutil.ErrUnsafePath or ErrConflict, naming
// every offending path) and nothing is written. Checkpointer.Apply and
// Revert predict the whole tree (hashed through the stat cache), so any
// difference from the manifest is caught, not only in touched files; after
// writing, the touched files are read back and verified. A path already in
// its final state is accepted, so an Apply interrupted by a crash is simply
// run again. Paths are confined to the root (fsutil.CheckRelPath: no "..",
// no absolute paths, no backslashes or control characters) and never pass
// through a symlink, unless the same diff first replaces that symlink. A
// symlink whose target points outside the tree is recorded, diffed and
// restored as a link: decree never follows it and never writes through it.
//
// Memory: DiffTo streams a diff to a writer, and writes every change with
// a side over StreamThreshold (8 MiB) as a binary patch streamed from the
// store: as git's "delta" hunks (forward and reverse, a few hundred bytes
// for a 16-byte edit of a 500 MB file) when the two sides share most
// blocks at the same offsets, else as literals (bindelta.go); Restore
// puts a tree back to a manifest from the store without a diff;
// RevertFile undoes a stored diff over 64 MiB, or one touching a file over
// StreamThreshold, by reading only its section headers, then restoring.
// They keep memory bounded whatever the size of the files. Diff, Apply and Revert work in memory (the diff, and
// the touched files).
//
// Line diffs use Myers' algorithm in linear space (myers.go): minimal, and a
// 50,000-line file with 500 scattered edits diffs in tens of milliseconds.
//
// The store keeps old contents (see Store): blobs are zlib-compressed
// (fast level; kept raw when that does not help) and written as one pack per
// snapshot, so a first snapshot adds the tree's compressed size: 193 MB
// for the 306 MB benchmark tree (bench/checkpoint), of which 45% is random
// binary data that does not compress.
//
// As in git, ignore rules only hide untracked files: a path in the "before"
// manifest stays tracked by Diff and Revert even if the routine adds it to
// .gitignore. Conversely a file the routine creates and hides with an
// ignore rule it adds itself is never tracked, so a revert leaves it behind
// (git would too).
//
// Limits: file names with a backslash or a control character are recorded
// and diffed, but Apply refuses them (fsutil's confinement rule). Empty
// directories are not tracked. The stat cache trusts a file only when its
// mtime is more than two seconds older than the scan that hashed it
// (git's "racily clean" problem), so files modified just before a snapshot
// are re-read once more by the next one. GNU patch reads decree's diffs
// except binary patches, a file replaced by a directory or back, and (in
// one of the two directions) a file replaced by a symlink or back; git
// apply reads all of them, forward and reverse.
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
// text), and diffs speak only git's 100644/100755. The exact permission
// bits are recorded beside them: a regular file whose bits are not its
// mode's default (0644, 0755) has "perm": "600" (or "700", "640", ...) in
// its entry, and every manifest a snapshot takes says "exact_perms": true.
// Revert, Apply with a wanted manifest and Restore give every file they
// write, and every file whose bits alone changed (a chmod 600 makes no
// diff section), exactly the recorded bits, and verify them afterwards: a
// routine that chmods 700 a 644 file and fails leaves it 644. Restoring to
// a manifest without "exact_perms" (written by an older decree) keeps a
// file's bits git does not track, as before. Setuid, setgid and sticky
// bits are not recorded. Empty directories are not tracked, and
// directories a diff empties are removed (as git apply does).
//
// A Checkpointer serves one project: it owns that project's object store and
// stat cache and serialises its snapshots. The controller keeps one per
// project (e.g. Options{ObjectsDir: ".decree/objects", CachePath:
// ".decree/statcache"}) and, while it serves, calls Serve for the project
// root: the Checkpointer then keeps the tree's manifest and stat data in
// memory and learns from the kernel what changed (package treewatch,
// inotify on Linux), so a snapshot costs O(changes): it walks the tree only
// first, after lost events, or where no watcher works (other systems, network
// file systems, the watch limit). See Serve for the rules it keeps.
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
	// MaxWatches caps the directories Serve watches (0: only the kernel's
	// limit, fs.inotify.max_user_watches on Linux). A tree with more is
	// walked at every snapshot, as without Serve.
	MaxWatches int
}

// Checkpointer takes snapshots, produces diffs and applies them for one
// project. It is safe for concurrent use; snapshots are serialised.
type Checkpointer struct {
	store      *Store
	cachePath  string
	workers    int
	noSync     bool
	maxWatches int
	log        *slog.Logger

	mu      sync.Mutex
	stats   Stats
	watched map[string]*watchState // roots served (Serve), by absolute path
}

// Stats describes the work done by the last snapshot.
type Stats struct {
	Files       int   // entries in the manifest
	CacheHits   int   // files whose hash came from the stat cache
	Hashed      int   // files read and hashed
	HashedBytes int64 // bytes read
	Stored      int   // new blobs written to the store
	// Walked says the snapshot walked the whole tree; a snapshot of a
	// root served by Serve does not, once primed (it looks only at what
	// the kernel reported changed).
	Walked bool
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
	return &Checkpointer{store: store, cachePath: opts.CachePath, workers: w, noSync: opts.NoSync, maxWatches: opts.MaxWatches, log: log}, nil
}

// Store returns the content store.
func (c *Checkpointer) Store() *Store { return c.store }

// LastStats returns the statistics of the most recent snapshot.
func (c *Checkpointer) LastStats() Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stats
}
