package checkpoint

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/decreehq/decree/pkg/fsutil"
)

// located is where a tree-relative path lands on disk.
type located struct {
	abs string
	// info is the lstat result, or nil if the path does not exist (also when
	// an ancestor is missing, is a file, or is a symlink).
	info fs.FileInfo
	// viaLink names the ancestor that is a symlink, if any. Nothing below a
	// symlink belongs to the tree: decree never follows one.
	viaLink string
}

// locate validates rel (fsutil.CheckRelPath) and lstat's it and each of its
// ancestors below root without following any symlink.
func locate(root, rel string) (located, error) {
	if err := fsutil.CheckRelPath(rel); err != nil {
		return located{}, err
	}
	loc := located{abs: filepath.Join(root, filepath.FromSlash(rel))}
	parts := strings.Split(rel, "/")
	for i := 1; i < len(parts); i++ {
		anc := strings.Join(parts[:i], "/")
		fi, err := os.Lstat(filepath.Join(root, filepath.FromSlash(anc)))
		switch {
		case errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR):
			return loc, nil
		case err != nil:
			return loc, fmt.Errorf("%s: %w", rel, err)
		case fi.Mode()&fs.ModeSymlink != 0:
			loc.viaLink = anc
			return loc, nil
		case !fi.IsDir():
			return loc, nil
		}
	}
	fi, err := os.Lstat(loc.abs)
	switch {
	case errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR):
	case err != nil:
		return loc, fmt.Errorf("%s: %w", rel, err)
	default:
		loc.info = fi
	}
	return loc, nil
}
