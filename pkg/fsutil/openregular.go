package fsutil

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// OpenRegular opens a file that must be a regular file for reading
// (ErrNotRegular otherwise),
// without ever blocking on or following anything else: O_NONBLOCK (a FIFO
// opens at once instead of waiting for a writer), O_NOFOLLOW (a symlink is
// refused) and O_NOCTTY, then the opened file's type is checked, so a file
// swapped for a FIFO or device meanwhile is refused too. Reads of a
// regular file are unaffected by O_NONBLOCK. Callers stream from it (a
// message body, a log) instead of reading it whole.
func OpenRegular(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOFOLLOW|syscall.O_NOCTTY, 0)
	if err != nil {
		if errors.Is(err, syscall.ELOOP) {
			return nil, fmt.Errorf("%w: %s is a symlink", ErrNotRegular, path)
		}
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("%w: %s is a %s", ErrNotRegular, path, FileKind(fi.Mode()))
	}
	return f, nil
}
