package checkpoint

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sort"

	"github.com/decreehq/decree/pkg/fsutil"
)

// Changed lists the paths a diff touches that are no longer in the state
// the diff left them in: content that differs from the post-image's git
// blob id (from the "index" line), a file the diff created or modified that
// is gone, or one it deleted that is back. It reads only the touched paths.
// Undoing the diff (Revert) would refuse exactly while this list is not
// empty, so callers use it to tell people what blocks a revert.
func Changed(root string, diff []byte) ([]string, error) {
	files, err := parseDiff(diff)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, f := range files {
		name := f.NewName
		if f.IsDelete {
			name = f.OldName
		}
		abs, err := fsutil.ConfinedJoin(root, name)
		if err != nil {
			return nil, err
		}
		fi, err := os.Lstat(abs)
		exists := err == nil && !fi.IsDir()
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("check %s: %w", name, err)
		}
		switch {
		case f.IsDelete:
			if exists {
				out = append(out, name)
			}
		case !exists:
			out = append(out, name)
		case fullOID(f.NewOIDPrefix):
			var data []byte
			if fi.Mode()&fs.ModeSymlink != 0 {
				target, err := os.Readlink(abs)
				if err != nil {
					return nil, fmt.Errorf("check %s: %w", name, err)
				}
				data = []byte(target)
			} else if data, err = os.ReadFile(abs); err != nil {
				return nil, fmt.Errorf("check %s: %w", name, err)
			}
			if gitBlobID(data) != f.NewOIDPrefix {
				out = append(out, name)
			}
		}
	}
	sort.Strings(out)
	return out, nil
}
