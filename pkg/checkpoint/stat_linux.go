package checkpoint

import (
	"io/fs"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

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

// syncFS flushes the file system holding dir to stable storage with one
// syncfs(2) call, instead of one fsync per stored blob.
func syncFS(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	return unix.Syncfs(int(f.Fd()))
}
