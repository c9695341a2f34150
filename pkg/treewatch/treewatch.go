// Package treewatch tells which paths of a directory tree changed, as the
// kernel reports them: inotify(7) on Linux. Elsewhere (macOS's FSEvents
// needs cgo, which decree does not use) New returns ErrUnsupported and the
// caller walks the tree instead.
//
// A Watcher watches the directories it is given with Add, one by one (the
// caller adds a directory's watch before reading it, so that a change is
// either in what it read or reported afterwards). Drain returns, without
// blocking, every path named by an event queued since the last Drain:
// "dir/name" for an entry created, written, deleted, moved or changed in
// mode inside a watched directory. It reports no content: the caller
// lstats each path. Drain says Overflow when the kernel dropped events
// (its queue, fs.inotify.max_queued_events, filled up) or the root itself
// was moved or deleted: anything may have changed, and the caller must
// walk the whole tree again.
//
// Limits, as for git's fsmonitor and watchman: changes through a shared
// mmap, through a hard link in another directory (the caller should stat
// files with several links itself), or made by another host on a network
// file system are not reported. New refuses network and FUSE
// file systems (ErrUnsupported) for that reason; the caller should not
// rely on a watcher where files change in those ways.
package treewatch

import (
	"errors"
)

// ErrUnsupported is returned by New where no watcher can serve the tree:
// another OS than Linux, or a network or FUSE file system.
var ErrUnsupported = errors.New("treewatch: file change notification is not available here")

// ErrLimit is returned by Add when the kernel refuses another watch (on
// Linux: fs.inotify.max_user_watches is reached). The caller should stop
// watching and walk the tree instead.
var ErrLimit = errors.New("treewatch: the kernel's limit on watches is reached (raise fs.inotify.max_user_watches)")

// Changes is what Drain found.
type Changes struct {
	// Paths are the entries named by events, slash-separated and relative
	// to the root ("dir/name", or "name" in the root), each once, in no
	// particular order.
	Paths []string
	// Overflow says events were lost: walk the whole tree.
	Overflow bool
}

// Options configures a Watcher.
type Options struct {
	// MaxWatches caps the directories watched (0: only the kernel's
	// limit); Add beyond it returns ErrLimit.
	MaxWatches int
}
