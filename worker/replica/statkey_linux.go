package replica

import (
	"io/fs"
	"syscall"
)

func keyOf(fi fs.FileInfo) statKey {
	k := statKey{Size: fi.Size(), Mtime: fi.ModTime().UnixNano(), Mode: uint32(fi.Mode())}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		k.Ctime = st.Ctim.Sec*1e9 + st.Ctim.Nsec
		k.Ino = st.Ino
	}
	return k
}
