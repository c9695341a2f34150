//go:build !linux

package fsutil

import "os"

// StartWriteback does nothing here; see writeback_linux.go.
func StartWriteback(*os.File, int64, int64) {}
