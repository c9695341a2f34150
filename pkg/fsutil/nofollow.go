package fsutil

import (
	"fmt"
	"os"
	"syscall"
)

// OpenFileNoFollow opens path for reading without following a symlink at
// its last component, and refuses anything but a regular file. Decree
// treats symlinks as data: when a path it scanned as a file has been
// replaced by a link since, reading through the link (perhaps to a file
// outside the project) would be wrong, so the open fails instead.
func OpenFileNoFollow(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("%w: %s is not a regular file", ErrUnsafePath, path)
	}
	return f, nil
}
