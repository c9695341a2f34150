//go:build !linux

package replica

import "io/fs"

// keyOf without change time and inode (see statkey_linux.go): the stat
// cache trusts size, mtime and mode only.
func keyOf(fi fs.FileInfo) statKey {
	return statKey{Size: fi.Size(), Mtime: fi.ModTime().UnixNano(), Mode: uint32(fi.Mode())}
}
