//go:build !linux

package testtool

import "syscall"

// unmountDetach unmounts dir (no lazy unmount outside Linux).
func unmountDetach(dir string) error { return syscall.Unmount(dir, 0) }
