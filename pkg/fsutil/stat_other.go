//go:build !linux

package fsutil

import (
	"os"
	"syscall"
)

func ctimeOf(st *syscall.Stat_t) int64 { return st.Ctimespec.Nano() }

func syncFS(f *os.File) error { return f.Sync() }
