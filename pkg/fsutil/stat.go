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
	return ctimeOf(st), st.Ino, true
}

// SyncFS flushes the file system holding dir to stable storage: one
// syncfs(2) call on Linux instead of one fsync per file written; where
// there is no syncfs (macOS) only the directory itself is synced.
func SyncFS(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	return syncFS(f)
}
