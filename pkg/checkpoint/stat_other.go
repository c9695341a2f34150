//go:build !linux

package checkpoint

import (
	"io/fs"
)

// keyOf without ctime and inode: the stat cache is weaker here (size, mtime
// and mode only) but still never trusts racily-clean entries.
func keyOf(fi fs.FileInfo) statKey {
	return statKey{size: fi.Size(), mtime: fi.ModTime().UnixNano(), mode: uint32(fi.Mode())}
}
