package fsutil

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// SpareSuffix and PrevSuffix name the hidden companions RewriteFile keeps
// beside a file: "."+name+SpareSuffix is the spare inode the next content
// is written into, "."+name+PrevSuffix exists only in the middle of a
// swap. Both contain ".tmp-", so directory listings that skip temporary
// files skip them too.
const (
	SpareSuffix = ".tmp-spare"
	PrevSuffix  = ".tmp-prev"
)

// RewriteFile replaces the content of a small file that is rewritten
// often (a state file) as ReplaceFileUnsynced does: a reader opening path
// sees the old or the new complete content, and a crash of the process
// at any instant leaves one of the two. Unlike a write to a new temporary
// file, it allocates no inode per write and frees none: the content goes
// into a spare file kept beside path, which is then swapped in by a hard
// link and two renames, and the old inode becomes the next spare.
//
// Why: every freed inode costs later file creations on the same file
// system (ext4 without a journal skips inodes freed in the last minute
// when it allocates a new one, scanning past each), and a state file
// rewritten several times per message made that scan the largest single
// cost of processing a message.
//
// A reader that holds path open across two rewrites may see the second
// one being written into the inode it reads; readers that parse the file
// retry on a torn read (see the callers). Nothing is fsynced (see
// SyncFiles). Where hard links are not supported, it falls back to
// ReplaceFileUnsynced.
func RewriteFile(path string, data []byte, perm fs.FileMode) error {
	dir, base := filepath.Split(path)
	spare := filepath.Join(dir, "."+base+SpareSuffix)
	prev := filepath.Join(dir, "."+base+PrevSuffix)
	f, err := os.OpenFile(spare, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, perm)
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	// Keep the current inode alive under prev while spare takes its name.
	err = os.Link(path, prev)
	if errors.Is(err, fs.ErrExist) {
		_ = os.Remove(prev) // left by an interrupted swap
		err = os.Link(path, prev)
	}
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			// First write: no inode to keep.
			if err := os.Rename(spare, path); err != nil {
				return fmt.Errorf("write %s: %w", path, err)
			}
			return nil
		}
		// No hard links here: a fresh temporary file each time.
		_ = os.Remove(spare)
		return ReplaceFileUnsynced(path, data, perm)
	}
	if err := os.Rename(spare, path); err != nil {
		_ = os.Remove(prev)
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(prev, spare); err != nil {
		return fmt.Errorf("write %s: keep the spare: %w", path, err)
	}
	return nil
}
