// Package fsutil holds the small file-system primitives every part of decree
// relies on: crash-safe writes (temp file, fsync, rename, fsync of the
// directory), crash-safe moves, and confinement of paths that arrive from
// outside (message names, follow-up files, diff paths, synced paths) to a root.
package fsutil

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"unicode"
)

// ErrUnsafePath is wrapped by every confinement error, so callers can map it
// to a single "bad input" outcome.
var ErrUnsafePath = errors.New("unsafe path")

// WriteFileAtomic writes data to path so that a crash at any instant leaves
// either the old content or the new content, never a mix: the data goes to a
// temporary file in the same directory, is fsynced, renamed over path, and the
// directory is fsynced so the rename itself is durable.
func WriteFileAtomic(path string, data []byte, perm fs.FileMode) error {
	if err := ReplaceFile(path, data, perm); err != nil {
		return err
	}
	return SyncDir(filepath.Dir(path))
}

// ReplaceFile is WriteFileAtomic without the final fsync of the directory.
// A crash leaves the old or the new content; only the rename itself may be
// lost to a power failure. Callers use it for files rewritten many times
// (state that was durable once already) or whose directory they sync later.
func ReplaceFile(path string, data []byte, perm fs.FileMode) error {
	return ReplaceFileFunc(path, perm, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
}

// ReplaceFileFunc is ReplaceFile with the content written by write, so
// that a large file can be streamed into place without being held in
// memory. Nothing replaces path when write fails.
func ReplaceFileFunc(path string, perm fs.FileMode, write func(io.Writer) error) error {
	return replaceFile(path, perm, write, true)
}

// ReplaceFileUnsynced is ReplaceFile without any fsync: readers and a
// process that restarts after a crash of decree (kill -9, OOM) see the old
// or the new complete content, because a rename is atomic; only a crash of
// the machine may lose the change (or, on file systems that do not order
// data before renames, leave the file empty). Callers record the path and
// make it durable with SyncFiles before anything depends on it surviving
// a power failure: several rewrites of one file then cost one fsync.
func ReplaceFileUnsynced(path string, data []byte, perm fs.FileMode) error {
	return replaceFile(path, perm, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	}, false)
}

// ReplaceFileFuncUnsynced is ReplaceFileUnsynced with the content written
// by write.
func ReplaceFileFuncUnsynced(path string, perm fs.FileMode, write func(io.Writer) error) error {
	return replaceFile(path, perm, write, false)
}

// SyncFiles fsyncs each path (a file or a directory; one that no longer
// exists is skipped, since whatever replaced or removed it is a directory
// change the directory's fsync covers) and then every distinct parent
// directory of the files, so that the contents and the renames that put
// them in place survive a power failure.
//
// The files are synced concurrently, then the directories: a disk with a
// queue (any SSD, a virtual disk) or a journaling file system that commits
// concurrent fsyncs together finishes a batch in about the time of one,
// where one after the other costs one device flush each. No directory is
// synced before every file is, so a rename never becomes durable ahead of
// the content it names.
func SyncFiles(paths ...string) error {
	dirs := make(map[string]bool, len(paths))
	for _, p := range paths {
		dirs[filepath.Dir(p)] = true
	}
	var files []string
	for _, p := range paths {
		if !dirs[p] { // a directory listed is synced below as a parent
			files = append(files, p)
		}
	}
	if err := syncAll(files, syncPath); err != nil {
		return err
	}
	parents := make([]string, 0, len(dirs))
	for d := range dirs {
		parents = append(parents, d)
	}
	return syncAll(parents, SyncDir)
}

// syncParallel bounds the fsyncs SyncFiles has in flight.
const syncParallel = 8

// syncAll runs syncOne on every path, at most syncParallel at once, and
// returns the first error (after all have ended).
func syncAll(paths []string, syncOne func(string) error) error {
	if len(paths) == 1 {
		return syncOne(paths[0])
	}
	errs := make([]error, len(paths))
	sem := make(chan struct{}, syncParallel)
	var wg sync.WaitGroup
	for i, p := range paths {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			errs[i] = syncOne(p)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// syncPath fsyncs one file; a file that no longer exists is skipped.
func syncPath(p string) error {
	f, err := os.Open(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("fsync %s: %w", p, err)
	}
	err = f.Sync()
	f.Close()
	if err != nil && !errors.Is(err, os.ErrInvalid) {
		return fmt.Errorf("fsync %s: %w", p, err)
	}
	return nil
}

func replaceFile(path string, perm fs.FileMode, write func(io.Writer) error, sync bool) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("write %s: create temporary file: %w", path, err)
	}
	werr := write(tmp)
	if werr == nil {
		werr = tmp.Chmod(perm)
	}
	if werr == nil && sync {
		werr = tmp.Sync()
	}
	if cerr := tmp.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Rename(tmp.Name(), path)
	}
	if werr != nil {
		_ = os.Remove(tmp.Name())
		return fmt.Errorf("write %s: %w", path, werr)
	}
	return nil
}

// WriteFileAtomicFunc is WriteFileAtomic with the content written by
// write (see ReplaceFileFunc).
func WriteFileAtomicFunc(path string, perm fs.FileMode, write func(io.Writer) error) error {
	if err := ReplaceFileFunc(path, perm, write); err != nil {
		return err
	}
	return SyncDir(filepath.Dir(path))
}

// ReplaceSymlink makes path a symlink to target, replacing whatever file
// or symlink is there in one rename: the link is made beside it under a
// temporary name first, so readers never see path missing.
func ReplaceSymlink(path, target string) error {
	tmp := filepath.Join(filepath.Dir(path), ".decree-link-"+filepath.Base(path))
	os.Remove(tmp)
	if err := os.Symlink(target, tmp); err != nil {
		return fmt.Errorf("create symlink %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("create symlink %s: %w", path, err)
	}
	return nil
}

// MoveFile renames src to dst and makes the rename durable by fsyncing both
// parent directories. dst's directory must exist.
func MoveFile(src, dst string) error {
	if err := os.Rename(src, dst); err != nil {
		return fmt.Errorf("move %s to %s: %w", src, dst, err)
	}
	if err := SyncDir(filepath.Dir(dst)); err != nil {
		return err
	}
	if filepath.Dir(src) != filepath.Dir(dst) {
		return SyncDir(filepath.Dir(src))
	}
	return nil
}

// SyncDir fsyncs a directory so that entries created, renamed or removed in it
// survive a crash.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("fsync directory %s: %w", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil && !errors.Is(err, os.ErrInvalid) {
		return fmt.Errorf("fsync directory %s: %w", dir, err)
	}
	return nil
}

// CheckRelPath validates a slash-separated path relative to some root, as it
// arrives from outside (a diff header, a replica sync request, a follow-up
// file). It rejects empty paths, absolute paths, backslashes, NUL and other
// control characters, and any "." or ".." element. It does not touch the
// file system; use ConfinedJoin to also guard against symlinks.
func CheckRelPath(rel string) error {
	if rel == "" {
		return fmt.Errorf("%w: empty path", ErrUnsafePath)
	}
	if strings.HasPrefix(rel, "/") || filepath.IsAbs(rel) {
		return fmt.Errorf("%w: %q is absolute; only paths inside the project are allowed", ErrUnsafePath, rel)
	}
	for _, r := range rel {
		if r == 0 || r == '\\' || unicode.IsControl(r) {
			return fmt.Errorf("%w: %q contains a backslash, NUL or control character", ErrUnsafePath, rel)
		}
	}
	for _, elem := range strings.Split(rel, "/") {
		switch elem {
		case "..":
			return fmt.Errorf("%w: %q climbs out of the project with '..'", ErrUnsafePath, rel)
		case ".", "":
			return fmt.Errorf("%w: %q is not a clean relative path", ErrUnsafePath, rel)
		}
	}
	return nil
}

// ConfinedJoin joins a relative path onto root after CheckRelPath, and then
// makes sure that no existing directory on the way is a symlink leading out of
// root. The final element may be a symlink (it is treated as an entry of its
// own, never followed). The returned path is root-joined and cleaned.
func ConfinedJoin(root, rel string) (string, error) {
	if err := CheckRelPath(rel); err != nil {
		return "", err
	}
	rootReal, err := filepath.EvalSymlinks(root)
	if err != nil {
		return "", fmt.Errorf("resolve root %s: %w", root, err)
	}
	full := filepath.Join(root, filepath.FromSlash(rel))
	parent := filepath.Dir(full)
	// Walk up to the deepest existing ancestor and resolve it.
	probe := parent
	for {
		if _, err := os.Lstat(probe); err == nil {
			break
		}
		next := filepath.Dir(probe)
		if next == probe {
			break
		}
		probe = next
	}
	real, err := filepath.EvalSymlinks(probe)
	if err != nil {
		return "", fmt.Errorf("resolve %s: %w", probe, err)
	}
	if !Within(rootReal, real) {
		return "", fmt.Errorf("%w: %q passes through a symlink that leads outside the project (%s)", ErrUnsafePath, rel, real)
	}
	return full, nil
}

// Within reports whether path equals root or lies below it. Both must be
// clean absolute paths.
func Within(root, path string) bool {
	if path == root {
		return true
	}
	return strings.HasPrefix(path, strings.TrimSuffix(root, string(filepath.Separator))+string(filepath.Separator))
}

// CheckName validates a single file-name component that arrives from outside
// (a message name, a routine name): not empty, no '/', '\', '..', NUL or
// control characters.
func CheckName(kind, name string) error {
	switch {
	case name == "":
		return fmt.Errorf("%w: %s name is empty", ErrUnsafePath, kind)
	case strings.ContainsAny(name, `/\`):
		return fmt.Errorf("%w: %s name %q contains a path separator; give a plain name", ErrUnsafePath, kind, name)
	case strings.Contains(name, ".."):
		return fmt.Errorf("%w: %s name %q contains '..'; give a plain name", ErrUnsafePath, kind, name)
	}
	for _, r := range name {
		if r == 0 || unicode.IsControl(r) {
			return fmt.Errorf("%w: %s name %q contains NUL or a control character", ErrUnsafePath, kind, name)
		}
	}
	return nil
}

// RemoveEmptyParents removes dir and each of its ancestors below root while
// they are empty, stopping at the first that is not (or at root).
func RemoveEmptyParents(root, dir string) {
	root = filepath.Clean(root)
	for dir != root && strings.HasPrefix(dir, root+string(filepath.Separator)) {
		if err := os.Remove(dir); err != nil {
			return
		}
		dir = filepath.Dir(dir)
	}
}
