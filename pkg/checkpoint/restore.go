package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"github.com/decreehq/decree/pkg/fsutil"
)

// Restore brings the tree at root back to want, a manifest taken by this
// Checkpointer (so its store holds every content of want), and returns the
// paths it changed. It is what reverting to a checkpoint needs, without a
// diff: every path that differs is deleted, or written from the store by
// streaming (a temporary file renamed into place, never through a
// symlink), so memory stays bounded whatever the size of the files. Every
// content is checked to be in the store before anything is touched;
// afterwards the changed paths are verified against want (hash, mode and
// exact permission bits). Like Apply it leaves ignored files alone, and
// running it again after a crash finishes the job.
func (c *Checkpointer) Restore(ctx context.Context, root string, want *Manifest) ([]string, error) {
	if want == nil {
		return nil, errors.New("restore: the manifest to restore is required")
	}
	cur, err := c.currentManifest(ctx, root, want)
	if err != nil {
		return nil, fmt.Errorf("restore: hash the current tree: %w", err)
	}
	changes := Compare(want, cur) // Before: wanted, After: current
	var missing []string
	for _, ch := range changes {
		if w := ch.Before; w != nil && w.Mode != ModeSymlink && w.Size > 0 && !c.store.Has(w.SHA256) {
			if ch.After == nil || ch.After.SHA256 != w.SHA256 {
				missing = append(missing, ch.Path)
			}
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("restore: %w for %s; nothing was changed", ErrMissingBlob, strings.Join(missing, ", "))
	}
	var paths []string
	// Deletions first, deepest first: current paths not wanted, and those
	// whose kind changes (file <-> symlink).
	for i := len(changes) - 1; i >= 0; i-- {
		ch := changes[i]
		if ch.After == nil || (ch.Before != nil && (ch.Before.Mode == ModeSymlink) == (ch.After.Mode == ModeSymlink)) {
			continue
		}
		abs, err := fsutil.ConfinedJoin(root, ch.Path)
		if err != nil {
			return paths, fmt.Errorf("restore: %w", err)
		}
		if err := os.Remove(abs); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return paths, fmt.Errorf("restore: delete %s: %w", ch.Path, err)
		}
		fsutil.RemoveEmptyParents(root, filepath.Dir(abs))
		if ch.Before == nil {
			paths = append(paths, ch.Path)
		}
	}
	perms := map[string]fs.FileMode{}
	for _, ch := range changes {
		if err := ctx.Err(); err != nil {
			return paths, err
		}
		w := ch.Before
		if w == nil {
			continue
		}
		paths = append(paths, ch.Path)
		if err := c.restoreOne(root, ch.Path, *w, want.PermOf(ch.Path), want.ExactPerms, ch.After, perms); err != nil {
			return paths, fmt.Errorf("restore: %w", err)
		}
	}
	// Files whose content and git mode are right but whose permission bits
	// are not (a routine's chmod 600 or 700 of a 0750 file).
	changed := make(map[string]*planned, len(changes))
	for _, ch := range changes {
		changed[ch.Path] = nil
	}
	fixed, err := fixPerms(root, cur, want, changed, perms)
	paths = append(paths, fixed...)
	if err != nil {
		return paths, fmt.Errorf("restore: %w", err)
	}
	if !c.noSync && len(paths) > 0 {
		if err := fsutil.SyncFS(root); err != nil {
			return paths, fmt.Errorf("restore: flush %s: %w", root, err)
		}
	}
	sort.Strings(paths)
	return paths, verify(root, paths, want, perms)
}

// currentManifest hashes the tree at root (through the stat cache, storing
// nothing), keeping the paths of tracked that still exist but are now
// ignored, as git does.
func (c *Checkpointer) currentManifest(ctx context.Context, root string, tracked *Manifest) (*Manifest, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	m, err := c.snapshot(ctx, root, false)
	if err != nil {
		return nil, err
	}
	return c.withTracked(root, tracked, m, false)
}

// restoreOne writes the wanted entry w at rel; cur is what the snapshot
// found there (nil when absent or already deleted as another kind).
// perm is the permission bits the wanted file has (Manifest.PermOf); when
// the manifest does not record exact bits, the file keeps those git does
// not track.
func (c *Checkpointer) restoreOne(root, rel string, w Entry, perm fs.FileMode, exact bool, cur *Entry, perms map[string]fs.FileMode) error {
	abs, err := prepareParents(root, rel)
	if err != nil {
		return err
	}
	if fi, err := os.Lstat(abs); err == nil && fi.IsDir() {
		if err := removeEmptyTree(abs); err != nil {
			return fmt.Errorf("cannot put %s back: a directory is in the way: %w", rel, err)
		}
	}
	if w.Mode == ModeSymlink {
		return fsutil.ReplaceSymlink(abs, w.Link)
	}
	if cur != nil && cur.Mode != ModeSymlink && cur.SHA256 == w.SHA256 {
		// Same content, other mode: only the permission bits change.
		if !exact {
			fi, err := os.Lstat(abs)
			if err != nil {
				return err
			}
			perm = fi.Mode().Perm() &^ 0o111 // keep the bits git does not track
			if w.Mode == ModeExec {
				perm |= (perm & 0o444) >> 2
			}
		}
		perms[rel] = perm
		return os.Chmod(abs, perm)
	}
	if fi, err := os.Lstat(abs); err == nil && !exact && fi.Mode().IsRegular() && ModeOf(fi.Mode()) == w.Mode {
		perm = fi.Mode().Perm() // an old manifest: keep bits git does not track
	}
	perms[rel] = perm
	return c.writeBlob(abs, rel, w, perm)
}

// prepareParents creates the directories above rel, refusing to pass
// through a symlink, and returns rel's absolute path.
func prepareParents(root, rel string) (string, error) {
	abs, err := fsutil.ConfinedJoin(root, rel)
	if err != nil {
		return "", err
	}
	dir := root
	for _, part := range strings.Split(path.Dir(rel), "/") {
		if part == "." {
			break
		}
		dir = filepath.Join(dir, part)
		fi, err := os.Lstat(dir)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
				return "", err
			}
		case err != nil:
			return "", err
		case fi.Mode()&fs.ModeSymlink != 0:
			return "", fmt.Errorf("%w: cannot put %s back: %s is a symlink, and decree never writes through one", fsutil.ErrUnsafePath, rel, dir)
		case !fi.IsDir():
			return "", fmt.Errorf("cannot put %s back: %s is a file that is not tracked (an ignored file?); move it away", rel, dir)
		}
	}
	return abs, nil
}

// writeBlob streams e's content from the store to a temporary file beside
// abs, checking its hash, and renames it into place.
func (c *Checkpointer) writeBlob(abs, rel string, e Entry, perm fs.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(abs), ".decree-tmp-*")
	if err != nil {
		return fmt.Errorf("put %s back: %w", rel, err)
	}
	defer os.Remove(tmp.Name())
	if e.Size > 0 {
		r, err := c.store.Open(e.SHA256)
		if err != nil {
			tmp.Close()
			return fmt.Errorf("put %s back: %w", rel, err)
		}
		_, err = io.Copy(tmp, r)
		r.Close()
		if err != nil {
			tmp.Close()
			return fmt.Errorf("put %s back: %w", rel, err)
		}
	}
	err = tmp.Chmod(perm)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), abs)
	}
	if err != nil {
		return fmt.Errorf("put %s back: %w", rel, err)
	}
	return nil
}
