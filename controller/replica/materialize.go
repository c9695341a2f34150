package replica

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"

	"github.com/decreehq/decree/pkg/checkpoint"
	"github.com/decreehq/decree/pkg/fsutil"
	"github.com/decreehq/decree/pkg/wiremanifest"
	decreev1 "github.com/decreehq/decree/proto/decree/v1"
)

// Applied says what Materialize changed.
type Applied struct {
	// Written are paths created or replaced (content, link or mode).
	Written []string
	// Deleted are paths removed.
	Deleted []string
}

// Materialize brings the controller's tree to the replica's manifest
// entries, given base, the manifest the replica was synced to before the
// run: only the paths whose entry differs between base and the replica are
// touched, so edits made on the controller's tree meanwhile elsewhere
// survive. Everything is checked before the tree is touched (paths,
// symlink targets, sizes, and that every new content is in the object
// store); then paths are deleted, contents written atomically from the
// store (hash-checked while copying), links created and modes applied, and
// finally every touched path is verified against the replica's manifest.
func (s *Service) Materialize(ctx context.Context, base *checkpoint.Manifest, entries []*decreev1.FileEntry) (Applied, error) {
	var out Applied
	after, err := wiremanifest.FromProto(entries, 0)
	if err != nil {
		return out, fmt.Errorf("the worker's workspace manifest was refused: %w", err)
	}
	changes := checkpoint.Compare(base, after)
	if len(changes) == 0 {
		return out, nil
	}
	root := s.opts.Root
	var missing []string
	for _, c := range changes {
		if _, err := fsutil.ConfinedJoin(root, c.Path); err != nil {
			return out, fmt.Errorf("the worker's workspace manifest was refused: %w", err)
		}
		// Only new contents are held to the upload limit: a large file the
		// controller already has may stay.
		if a := c.After; a != nil && a.Mode != checkpoint.ModeSymlink && a.Size > s.opts.MaxBlobSize && (c.Before == nil || c.Before.SHA256 != a.SHA256) {
			return out, fmt.Errorf("the worker's workspace manifest was refused: %w: %s is %d bytes, more than the %d bytes a replica may send back; list it in .decreeignore or raise the controller's limit", checkpoint.ErrBlobTooLarge, c.Path, a.Size, s.opts.MaxBlobSize)
		}
		if a := c.After; a != nil && a.Mode != checkpoint.ModeSymlink && a.Size > 0 && !s.opts.Objects.Has(a.SHA256) {
			missing = append(missing, c.Path)
		}
	}
	if len(missing) > 0 {
		return out, fmt.Errorf("%w: the worker did not upload the new content of %d file(s), e.g. %s; the tree was left unchanged", ErrMissing, len(missing), strings.Join(first(missing, 5), ", "))
	}
	// Deletions first (deepest paths first), so that a file that becomes
	// a directory, or the other way round, has room.
	var deletes []checkpoint.Change
	for _, c := range changes {
		if c.After == nil || (c.Before != nil && (c.Before.Mode == checkpoint.ModeSymlink) != (c.After.Mode == checkpoint.ModeSymlink)) {
			deletes = append(deletes, c)
		}
	}
	sort.Slice(deletes, func(i, j int) bool { return deletes[i].Path > deletes[j].Path })
	for _, c := range deletes {
		if err := ctx.Err(); err != nil {
			return out, err
		}
		abs := filepath.Join(root, filepath.FromSlash(c.Path))
		if err := removeEntry(root, c.Path); err != nil {
			return out, err
		}
		if c.After == nil {
			out.Deleted = append(out.Deleted, c.Path)
			fsutil.RemoveEmptyParents(root, filepath.Dir(abs))
		}
	}
	for _, c := range changes {
		if c.After == nil {
			continue
		}
		if err := ctx.Err(); err != nil {
			return out, err
		}
		if err := s.writeEntry(c); err != nil {
			return out, err
		}
		out.Written = append(out.Written, c.Path)
	}
	if d, err := os.Open(root); err == nil {
		syncFS(d)
		d.Close()
	}
	paths := make([]string, 0, len(changes))
	for _, c := range changes {
		paths = append(paths, c.Path)
	}
	if err := verify(root, paths, after); err != nil {
		return out, fmt.Errorf("after applying the worker's changes: %w", err)
	}
	return out, nil
}

// verify checks every path against want, hashing files as streams (a
// large file is never held in memory): present with the same hash, mode
// and link target when want lists it, absent otherwise.
func verify(root string, paths []string, want *checkpoint.Manifest) error {
	var bad []string
	for _, p := range paths {
		e, listed := want.Files[p]
		abs := filepath.Join(root, filepath.FromSlash(p))
		fi, err := os.Lstat(abs)
		switch {
		case err != nil && !listed:
			continue
		case err != nil:
			bad = append(bad, p+" (missing)")
			continue
		case !listed:
			bad = append(bad, p+" (exists, should be absent)")
			continue
		}
		var got checkpoint.Entry
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			t, err := os.Readlink(abs)
			if err != nil {
				bad = append(bad, p+" ("+err.Error()+")")
				continue
			}
			sum := sha256.Sum256([]byte(t))
			got = checkpoint.Entry{SHA256: hex.EncodeToString(sum[:]), Size: int64(len(t)), Mode: checkpoint.ModeSymlink, Link: t}
		case fi.Mode().IsRegular():
			sum, n, err := checkpoint.HashFile(abs)
			if err != nil {
				bad = append(bad, p+" ("+err.Error()+")")
				continue
			}
			got = checkpoint.Entry{SHA256: sum, Size: n, Mode: checkpoint.ModeOf(fi.Mode())}
		default:
			bad = append(bad, p+" (not a file or symlink)")
			continue
		}
		if got != e {
			bad = append(bad, p+" (content or mode differs)")
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("%w: %d path(s) do not match the worker's manifest: %s", checkpoint.ErrConflict, len(bad), strings.Join(first(bad, 10), "; "))
	}
	return nil
}

// removeEntry deletes a tracked file or symlink; a path already gone is
// fine, a directory in its place is an error.
func removeEntry(root, rel string) error {
	abs, err := fsutil.ConfinedJoin(root, rel)
	if err != nil {
		return err
	}
	fi, err := os.Lstat(abs)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("delete %s: %w", rel, err)
	}
	if fi.IsDir() {
		return fmt.Errorf("delete %s: it is a directory on the controller; remove it by hand, then requeue", rel)
	}
	if err := os.Remove(abs); err != nil {
		return fmt.Errorf("delete %s: %w", rel, err)
	}
	return nil
}

// writeEntry creates or replaces one path with c.After.
func (s *Service) writeEntry(c checkpoint.Change) error {
	root := s.opts.Root
	a := c.After
	if err := mkdirs(root, c.Path); err != nil {
		return err
	}
	abs, err := fsutil.ConfinedJoin(root, c.Path)
	if err != nil {
		return err
	}
	if fi, err := os.Lstat(abs); err == nil && fi.IsDir() {
		return fmt.Errorf("write %s: a directory is in the way on the controller; remove it by hand, then requeue", c.Path)
	}
	if a.Mode == checkpoint.ModeSymlink {
		if err := wiremanifest.CheckLink(c.Path, a.Link); err != nil {
			return err
		}
		return fsutil.ReplaceSymlink(abs, a.Link)
	}
	// Same content, other mode: only the mode changes.
	if b := c.Before; b != nil && b.SHA256 == a.SHA256 && b.Mode != checkpoint.ModeSymlink {
		if fi, err := os.Lstat(abs); err == nil && fi.Mode().IsRegular() {
			return os.Chmod(abs, modePerm(fi.Mode().Perm(), a.Mode))
		}
	}
	return s.writeFile(abs, c.Path, *a)
}

// writeFile copies the blob of e from the store to a temporary file beside
// abs, checking its hash, and renames it into place.
func (s *Service) writeFile(abs, rel string, e checkpoint.Entry) error {
	tmp, err := os.CreateTemp(filepath.Dir(abs), ".decree-sync-*")
	if err != nil {
		return fmt.Errorf("write %s: %w", rel, err)
	}
	defer os.Remove(tmp.Name())
	h := sha256.New()
	var n int64
	if e.Size > 0 {
		r, err := s.opts.Objects.Open(e.SHA256)
		if err != nil {
			tmp.Close()
			return fmt.Errorf("write %s: %w", rel, err)
		}
		n, err = io.Copy(io.MultiWriter(tmp, h), io.LimitReader(r, e.Size+1))
		r.Close()
		if err != nil {
			tmp.Close()
			return fmt.Errorf("write %s: %w", rel, err)
		}
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != e.SHA256 || n != e.Size {
		tmp.Close()
		return fmt.Errorf("write %s: %w: the stored content hashes to %s (%d bytes), the worker announced %s (%d bytes)", rel, checkpoint.ErrBlobMismatch, got, n, e.SHA256, e.Size)
	}
	err = tmp.Chmod(e.Mode.Perm())
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), abs)
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", rel, err)
	}
	return nil
}

// mkdirs creates the parent directories of rel below root, refusing to go
// through a symlink or a file.
func mkdirs(root, rel string) error {
	parts := strings.Split(rel, "/")
	dir := root
	for _, p := range parts[:len(parts)-1] {
		dir = filepath.Join(dir, p)
		fi, err := os.Lstat(dir)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
				return fmt.Errorf("write %s: %w", rel, err)
			}
		case err != nil:
			return fmt.Errorf("write %s: %w", rel, err)
		case fi.Mode()&fs.ModeSymlink != 0:
			return fmt.Errorf("%w: write %s: %s is a symlink; nothing is written through one", fsutil.ErrUnsafePath, rel, dir)
		case !fi.IsDir():
			return fmt.Errorf("write %s: %s is a file, not a directory; remove it by hand, then requeue", rel, dir)
		}
	}
	return nil
}

// modePerm switches the execute bits of perm to match m: set where the
// read bit is set for an executable, cleared otherwise.
func modePerm(perm fs.FileMode, m checkpoint.Mode) fs.FileMode {
	if m == checkpoint.ModeExec {
		return perm | (perm&0o444)>>2
	}
	return perm &^ 0o111
}

func first(s []string, n int) []string {
	if len(s) > n {
		return s[:n]
	}
	return s
}
