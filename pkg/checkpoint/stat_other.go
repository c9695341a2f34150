//go:build !linux

package checkpoint

import (
	"io/fs"
)

// linkCount is 1: only Linux serves a tree with a watcher (see Serve).
func linkCount(fs.FileInfo) uint64 { return 1 }

// keyOf without ctime and inode: the stat cache is weaker here (size, mtime
// and mode only) but still never trusts racily-clean entries.
func keyOf(fi fs.FileInfo) statKey {
	return statKey{size: fi.Size(), mtime: fi.ModTime().UnixNano(), mode: uint32(fi.Mode())}
}
