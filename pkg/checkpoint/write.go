package checkpoint

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"

	"github.com/decreehq/decree/pkg/fsutil"
)

// writePlan carries out a checked plan: deletions first (removing
// directories they leave empty), then creations and modifications in path
// order. Every path is confined again just before it is written.
func writePlan(root string, plan map[string]*planned, durable bool) error {
	ordered := sortedPlan(plan)
	for i := len(ordered) - 1; i >= 0; i-- {
		p := ordered[i]
		if p.exists || p.curMode == 0 || p.curIsDir {
			continue
		}
		abs, err := fsutil.ConfinedJoin(root, p.path)
		if err != nil {
			return fmt.Errorf("apply: %w", err)
		}
		if err := os.Remove(abs); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("apply: delete %s: %w", p.path, err)
		}
		fsutil.RemoveEmptyParents(root, filepath.Dir(abs))
	}
	for _, p := range ordered {
		if !p.exists {
			continue
		}
		abs, err := fsutil.ConfinedJoin(root, p.path)
		if err != nil {
			return fmt.Errorf("apply: %w", err)
		}
		if err := os.MkdirAll(filepath.Dir(abs), 0o755); err != nil {
			return fmt.Errorf("apply: create directory for %s: %w", p.path, err)
		}
		if fi, err := os.Lstat(abs); err == nil && fi.IsDir() {
			// checkLayout made sure the diff emptied it; remove what is left.
			if err := removeEmptyTree(abs); err != nil {
				return fmt.Errorf("apply: replace directory %s by a file: %w", p.path, err)
			}
		}
		if p.mode == ModeSymlink {
			if err := fsutil.ReplaceSymlink(abs, string(p.data)); err != nil {
				return fmt.Errorf("apply: %s: %w", p.path, err)
			}
			continue
		}
		perm := p.mode.Perm()
		if p.curMode.IsRegular() && ModeOf(p.curMode) == p.mode {
			perm = p.curMode.Perm() // keep bits git does not track
		}
		if err := writeFileRename(abs, p.data, perm); err != nil {
			return fmt.Errorf("apply: %w", err)
		}
	}
	// One syncfs instead of an fsync per file: Apply is idempotent (paths
	// already in their final state are accepted), so after a crash it is
	// simply run again.
	if !durable {
		return nil
	}
	if err := syncFS(root); err != nil {
		return fmt.Errorf("apply: flush %s: %w", root, err)
	}
	return nil
}

// writeFileRename writes data to a temporary file beside path, sets perm and
// renames it over path (replacing a symlink rather than writing through it).
func writeFileRename(path string, data []byte, perm fs.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".decree-tmp-*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	_, err = tmp.Write(data)
	if err == nil {
		err = tmp.Chmod(perm)
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// removeEmptyTree removes a directory tree that holds only directories.
func removeEmptyTree(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if !e.IsDir() {
			return fmt.Errorf("%s still holds %s", dir, e.Name())
		}
		if err := removeEmptyTree(filepath.Join(dir, e.Name())); err != nil {
			return err
		}
	}
	return os.Remove(dir)
}

// Verify checks each of paths in the tree at root against want: a path in
// want must exist with its hash, mode and link target; a path not in want
// must not exist. Every mismatch is named in one error wrapping ErrConflict.
func Verify(root string, paths []string, want *Manifest) error {
	sorted := append([]string(nil), paths...)
	sort.Strings(sorted)
	var bad []string
	for _, p := range sorted {
		e, inWant := want.Files[p]
		loc, err := locate(root, p)
		if err != nil {
			bad = append(bad, p+" ("+err.Error()+")")
			continue
		}
		var got Entry
		exists := false
		if loc.info != nil {
			got, exists, err = readEntry(loc.abs)
		}
		switch {
		case err != nil:
			bad = append(bad, p+" ("+err.Error()+")")
		case exists && !inWant:
			bad = append(bad, p+" (exists, should be absent)")
		case !exists && inWant:
			bad = append(bad, p+" (missing)")
		case exists && got != e:
			why := "content differs"
			if got.Mode != e.Mode {
				why = fmt.Sprintf("mode %s, want %s", got.Mode, e.Mode)
			}
			bad = append(bad, p+" ("+why+")")
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("%w: %d file(s) do not match the manifest: %s", ErrConflict, len(bad), strings.Join(bad, "; "))
	}
	return nil
}

// readEntry lstat's and hashes one path.
func readEntry(abs string) (Entry, bool, error) {
	fi, err := os.Lstat(abs)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
		return Entry{}, false, nil // absent, or a parent is now a file
	}
	if err != nil {
		return Entry{}, false, err
	}
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		t, err := os.Readlink(abs)
		if err != nil {
			return Entry{}, false, err
		}
		return entryFor(ModeSymlink, []byte(t)), true, nil
	case fi.Mode().IsRegular():
		data, err := os.ReadFile(abs)
		if err != nil {
			return Entry{}, false, err
		}
		sum := sha256.Sum256(data)
		return Entry{SHA256: hex.EncodeToString(sum[:]), Size: int64(len(data)), Mode: ModeOf(fi.Mode())}, true, nil
	case fi.IsDir():
		return Entry{}, false, nil // a directory where a file was: "missing" or "absent"
	}
	return Entry{}, false, fmt.Errorf("not a regular file or symlink")
}
