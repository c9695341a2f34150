package fsutil

import (
	"errors"
	"syscall"
)

// LinkUnsupported reports whether err from os.Link means the file system
// has no hard links (FAT and exFAT, some network shares), so the caller
// should fall back to a copy or a rename.
func LinkUnsupported(err error) bool {
	return errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.ENOTSUP) ||
		errors.Is(err, syscall.EOPNOTSUPP) || errors.Is(err, syscall.EMLINK) || errors.Is(err, syscall.ENOSYS)
}
