package replica

import (
	"os"

	"golang.org/x/sys/unix"
)

// syncFS flushes the file system holding the open directory d with one
// syncfs(2), instead of an fsync per written file.
func syncFS(d *os.File) { _ = unix.Syncfs(int(d.Fd())) }
