//go:build !linux

package store

import "os"

// stampOf is dir's stamp without change time and inode (see
// stamp_linux.go): modification time and size. A listing trusts it a
// little less often than on Linux; the full check every RescanInterval
// still runs.
func stampOf(dir string) (dirStamp, bool) {
	fi, err := os.Stat(dir)
	if err != nil {
		return dirStamp{}, false
	}
	return dirStamp{mtime: fi.ModTime().UnixNano(), size: fi.Size()}, true
}
