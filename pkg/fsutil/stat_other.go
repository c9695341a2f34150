//go:build !linux

package fsutil

import (
	"io/fs"
	"os"
	"syscall"
)

// StatCtimeIno returns the status-change time (ns) and inode number of
// fi, when the system reports them.
func StatCtimeIno(fi fs.FileInfo) (ctime int64, ino uint64, ok bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, 0, false
	}
	return st.Ctimespec.Nano(), st.Ino, true
}

// SyncFS flushes dir; without syncfs(2) (macOS) only the directory itself
// is synced.
func SyncFS(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}
