package checkpoint

import (
	"io/fs"
	"syscall"

	"golang.org/x/sys/unix"
)

// linkCount is the number of hard links to the file (1 when unknown).
func linkCount(fi fs.FileInfo) uint64 {
	switch st := fi.Sys().(type) {
	case *syscall.Stat_t:
		return uint64(st.Nlink)
	case *unix.Stat_t:
		return uint64(st.Nlink)
	}
	return 1
}

func keyOf(fi fs.FileInfo) statKey {
	k := statKey{size: fi.Size(), mtime: fi.ModTime().UnixNano(), mode: uint32(fi.Mode())}
	switch st := fi.Sys().(type) {
	case *syscall.Stat_t:
		k.ctime = st.Ctim.Sec*1e9 + st.Ctim.Nsec
		k.ino = st.Ino
	case *unix.Stat_t:
		k.ctime = st.Ctim.Sec*1e9 + st.Ctim.Nsec
		k.ino = st.Ino
	}
	return k
}
