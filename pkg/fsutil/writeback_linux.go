//go:build linux

package fsutil

import (
	"os"

	"golang.org/x/sys/unix"
)

// StartWriteback asks the kernel to begin writing f's dirty pages in
// [off, off+n) to disk without waiting for them, so that a later fsync
// of a file written in pieces finds most of it already written. It is
// a hint: an error is ignored, and elsewhere than Linux it does nothing
// (the fsync then writes everything). It never replaces the fsync.
func StartWriteback(f *os.File, off, n int64) {
	_ = unix.SyncFileRange(int(f.Fd()), off, n, unix.SYNC_FILE_RANGE_WRITE)
}
