package store

import (
	"os"
	"syscall"
)

// stampOf is dir's stamp: modification and change time, size and inode.
func stampOf(dir string) (dirStamp, bool) {
	fi, err := os.Stat(dir)
	if err != nil {
		return dirStamp{}, false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return dirStamp{}, false
	}
	return dirStamp{mtime: fi.ModTime().UnixNano(), ctime: st.Ctim.Nano(), size: fi.Size(), ino: st.Ino}, true
}
