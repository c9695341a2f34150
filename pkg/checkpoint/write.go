package checkpoint

import (
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

	"github.com/decreehq/decree/pkg/fsutil"
)

// writePlan carries out a checked plan: deletions first (removing
// directories they leave empty), then creations and modifications in path
// order. Every path is confined again just before it is written. It
// returns the permission bits it gave each regular file it wrote, for the
// verification that follows.
//
// A file gets the exact permission bits want records for it (so a revert
// puts back 0600 or 0700). Without want, or for a path want does not list,
// a created file gets its mode's permission, 0644 or 0755, and a file
// changed in place keeps the bits git does not track (0600, 0664, ...)
// when its mode class stays.
func writePlan(root string, plan map[string]*planned, want *Manifest, durable bool) (map[string]fs.FileMode, error) {
	perms := map[string]fs.FileMode{}
	ordered := sortedPlan(plan)
	for i := len(ordered) - 1; i >= 0; i-- {
		p := ordered[i]
		if p.exists || p.curMode == 0 || p.curIsDir {
			continue
		}
		abs, err := fsutil.ConfinedJoin(root, p.path)
		if err != nil {
			return nil, fmt.Errorf("apply: %w", err)
		}
		if err := os.Remove(abs); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("apply: delete %s: %w", p.path, err)
		}
		fsutil.RemoveEmptyParents(root, filepath.Dir(abs))
	}
	for _, p := range ordered {
		if !p.exists {
			continue
		}
		abs, err := fsutil.ConfinedJoin(root, p.path)
		if err != nil {
			return nil, fmt.Errorf("apply: %w", err)
		}
		if err := os.MkdirAll(filepath.Dir(abs), 0o755); err != nil {
			return nil, fmt.Errorf("apply: create directory for %s: %w", p.path, err)
		}
		if fi, err := os.Lstat(abs); err == nil && fi.IsDir() {
			// checkLayout made sure the diff emptied it; remove what is left.
			if err := removeEmptyTree(abs); err != nil {
				return nil, fmt.Errorf("apply: replace directory %s by a file: %w", p.path, err)
			}
		}
		if p.mode == ModeSymlink {
			if err := fsutil.ReplaceSymlink(abs, string(p.data)); err != nil {
				return nil, fmt.Errorf("apply: %s: %w", p.path, err)
			}
			continue
		}
		perm := p.mode.Perm()
		if e, ok := want.lookup(p.path); ok && e.Mode == p.mode && want.ExactPerms {
			perm = want.PermOf(p.path)
		} else if p.curFile && ModeOf(p.curMode) == p.mode {
			perm = p.curMode.Perm() // keep bits git does not track
		}
		if err := writeFileRename(abs, p.data, perm); err != nil {
			return nil, fmt.Errorf("apply: %w", err)
		}
		perms[p.path] = perm
	}
	// One syncfs instead of an fsync per file: Apply is idempotent (paths
	// already in their final state are accepted), so after a crash it is
	// simply run again.
	if !durable {
		return perms, nil
	}
	if err := fsutil.SyncFS(root); err != nil {
		return nil, fmt.Errorf("apply: flush %s: %w", root, err)
	}
	return perms, nil
}

// fixPerms gives every regular file of want that the plan did not write,
// and whose entry current (the tree before applying) matches, the
// permission bits want records, when current's differ: a routine's chmod
// 600 changes no git mode, so no diff section carries it back. It adds
// what it set to perms and returns the paths.
func fixPerms(root string, current, want *Manifest, plan map[string]*planned, perms map[string]fs.FileMode) ([]string, error) {
	var out []string
	if want == nil || !want.ExactPerms {
		return nil, nil // an old manifest: the bits are unknown
	}
	for _, p := range want.Paths() {
		e := want.Files[p]
		if _, planned := plan[p]; planned || e.Mode == ModeSymlink {
			continue
		}
		if ce, ok := current.Files[p]; !ok || ce != e {
			continue
		}
		w := want.PermOf(p)
		if current.PermOf(p) == w {
			continue
		}
		abs, err := fsutil.ConfinedJoin(root, p)
		if err != nil {
			return out, fmt.Errorf("apply: %w", err)
		}
		if err := os.Chmod(abs, w); err != nil {
			return out, fmt.Errorf("apply: restore the permission of %s: %w", p, err)
		}
		perms[p] = w
		out = append(out, p)
	}
	return out, nil
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
// must not exist. A regular file must also be readable and writable by its
// owner (a file restored with permission 000 does not match "644", even
// for root, who could still read it). Every mismatch is named in one error
// wrapping ErrConflict.
func Verify(root string, paths []string, want *Manifest) error {
	return verify(root, paths, want, nil)
}

// verify is Verify that also wants the exact permission bits in perms (the
// ones writePlan gave the files it wrote).
func verify(root string, paths []string, want *Manifest, perms map[string]fs.FileMode) error {
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
		var perm fs.FileMode
		exists := false
		if loc.info != nil {
			got, perm, exists, err = readEntry(loc.abs)
		}
		switch {
		case err != nil:
			bad = append(bad, p+" ("+err.Error()+")")
		case exists && !inWant:
			bad = append(bad, p+" (exists, should be absent)")
		case !exists && inWant:
			bad = append(bad, p+" (missing)")
		case exists && got.Mode != e.Mode:
			bad = append(bad, fmt.Sprintf("%s (mode %s, want %s)", p, got.Mode, e.Mode))
		case exists && got != e:
			bad = append(bad, p+" (content differs)")
		case exists && got.Mode != ModeSymlink && !permOK(perm, perms, p):
			bad = append(bad, fmt.Sprintf("%s (permission %04o, want %04o)", p, perm, wantPerm(e.Mode, perms, p)))
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("%w: %d file(s) do not match the manifest: %s", ErrConflict, len(bad), strings.Join(bad, "; "))
	}
	return nil
}

// permOK reports whether a regular file's permission bits are acceptable:
// exactly those written when the file was written, else at least owner
// read and write.
func permOK(perm fs.FileMode, perms map[string]fs.FileMode, p string) bool {
	if w, ok := perms[p]; ok {
		return perm == w
	}
	return perm&0o600 == 0o600
}

func wantPerm(m Mode, perms map[string]fs.FileMode, p string) fs.FileMode {
	if w, ok := perms[p]; ok {
		return w
	}
	return m.Perm()
}

// readEntry lstat's and hashes one path; it also returns the permission
// bits.
func readEntry(abs string) (Entry, fs.FileMode, bool, error) {
	fi, err := os.Lstat(abs)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
		return Entry{}, 0, false, nil // absent, or a parent is now a file
	}
	if err != nil {
		return Entry{}, 0, false, err
	}
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		t, err := os.Readlink(abs)
		if err != nil {
			return Entry{}, 0, false, err
		}
		return entryFor(ModeSymlink, []byte(t)), fi.Mode().Perm(), true, nil
	case fi.Mode().IsRegular():
		f, err := os.Open(abs)
		if err != nil {
			return Entry{}, 0, false, err
		}
		defer f.Close()
		h := sha256.New()
		n, err := io.Copy(h, f)
		if err != nil {
			return Entry{}, 0, false, err
		}
		return Entry{SHA256: hex.EncodeToString(h.Sum(nil)), Size: n, Mode: ModeOf(fi.Mode())}, fi.Mode().Perm(), true, nil
	case fi.IsDir():
		return Entry{}, 0, false, nil // a directory where a file was: "missing" or "absent"
	}
	return Entry{}, 0, false, fmt.Errorf("not a regular file or symlink")
}
