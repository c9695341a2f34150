package fsutil

import (
	"errors"
	"io"
	"io/fs"
	"strings"
	"unicode"
)

// ErrNotRegular is wrapped by ReadRegular for anything but a regular file.
var ErrNotRegular = errors.New("not a regular file")

// ReadRegular reads a file that must be a regular file, without ever
// blocking on or following anything else: it opens with O_NONBLOCK and
// O_NOFOLLOW (a FIFO opens at once instead of waiting for a writer, a
// symlink is refused) and checks the opened file's type before reading, so
// a file swapped for a FIFO or device meanwhile is refused too.
func ReadRegular(path string) ([]byte, error) {
	f, err := OpenRegular(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}

// FileKind names the type of a file mode for people: "regular file",
// "directory", "symlink", "FIFO", "socket", "device".
func FileKind(m fs.FileMode) string {
	switch {
	case m.IsRegular():
		return "regular file"
	case m.IsDir():
		return "directory"
	case m&fs.ModeSymlink != 0:
		return "symlink"
	case m&fs.ModeNamedPipe != 0:
		return "FIFO (named pipe)"
	case m&fs.ModeSocket != 0:
		return "socket"
	case m&fs.ModeDevice != 0:
		return "device"
	}
	return "special file"
}

// SafeName turns a file name that arrived from outside into one that
// CheckName accepts: control characters, NUL and path separators become
// '_', ".." becomes "__", and an empty result becomes "unnamed".
func SafeName(name string) string {
	var b strings.Builder
	for _, r := range name {
		if r == 0 || r == '/' || r == '\\' || unicode.IsControl(r) {
			b.WriteByte('_')
			continue
		}
		b.WriteRune(r)
	}
	out := strings.ReplaceAll(b.String(), "..", "__")
	if out == "" {
		out = "unnamed"
	}
	return out
}
