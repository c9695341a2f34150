package testtool

import "syscall"

// unmountDetach unmounts dir lazily (MNT_DETACH), so a process still
// inside it does not keep the test from cleaning up.
func unmountDetach(dir string) error { return syscall.Unmount(dir, syscall.MNT_DETACH) }
