package fsutil

import (
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

func ctimeOf(st *syscall.Stat_t) int64 { return st.Ctim.Nano() }

func syncFS(f *os.File) error { return unix.Syncfs(int(f.Fd())) }
