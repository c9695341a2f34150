package proc

import (
	"os"

	"golang.org/x/sys/unix"
)

// growPipe makes the pipe of w pipeSize bytes, best effort.
func growPipe(w *os.File) { _, _ = unix.FcntlInt(w.Fd(), unix.F_SETPIPE_SZ, pipeSize) }
