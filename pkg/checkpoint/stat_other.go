//go:build !linux

package checkpoint

import (
	"io/fs"
	"os"
)

// keyOf without ctime and inode: the stat cache is weaker here (size, mtime
// and mode only) but still never trusts racily-clean entries.
func keyOf(fi fs.FileInfo) statKey {
	return statKey{size: fi.Size(), mtime: fi.ModTime().UnixNano(), mode: uint32(fi.Mode())}
}

// syncFS flushes dir; without syncfs(2) only the directory itself is synced.
func syncFS(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}
