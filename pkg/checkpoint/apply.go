package checkpoint

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"github.com/bluekeyes/go-gitdiff/gitdiff"

	"github.com/decreehq/decree/pkg/fsutil"
)

// ErrCorruptDiff is wrapped when a diff cannot be parsed.
var ErrCorruptDiff = errors.New("corrupt diff")

// ErrConflict is wrapped when the tree is not in the state a diff expects
// (a file changed behind decree's back), or the result would not match the
// wanted manifest.
var ErrConflict = errors.New("tree does not match the checkpoint")

// planned is the computed final state of one path.
type planned struct {
	path     string
	exists   bool
	mode     Mode
	data     []byte
	curMode  fs.FileMode // lstat mode before applying (0 if absent)
	curIsDir bool
	curFile  bool // a regular file was on disk before applying
}

// Apply applies diff to the tree at root, forward or in reverse, and checks
// every touched path against want (when want is not nil): present paths must
// have want's hash and mode, absent ones must be absent from want. Every
// check runs before anything is written, so a corrupt diff, a diff whose
// paths escape root, or a tree changed behind decree's back leaves the tree
// untouched. After writing, the touched files are read back and verified.
//
// Unlike the package-level Apply, the Checkpointer checks the whole tree,
// not only the touched paths: the current tree (hashed through the stat
// cache) with the diff applied must equal want exactly, so a truncated diff
// or a file changed outside the diff is caught before anything is written.
func (c *Checkpointer) Apply(ctx context.Context, root string, diff []byte, reverse bool, want *Manifest) error {
	return apply(ctx, root, diff, reverse, want, !c.noSync, c.currentTree(ctx, root, want))
}

// currentTree returns a function hashing the tree for the whole-tree check
// (nil when there is nothing to check against).
func (c *Checkpointer) currentTree(ctx context.Context, root string, want *Manifest) func() (*Manifest, error) {
	if want == nil {
		return nil
	}
	return func() (*Manifest, error) { return c.currentManifest(ctx, root, want) }
}

// Revert undoes diff (applies it in reverse) and verifies every touched file
// against before, the manifest taken before the change.
func (c *Checkpointer) Revert(ctx context.Context, root string, diff []byte, before *Manifest) error {
	if before == nil {
		return errors.New("revert: the manifest to revert to is required")
	}
	return apply(ctx, root, diff, true, before, !c.noSync, c.currentTree(ctx, root, before))
}

// Apply is Checkpointer.Apply without a Checkpointer (applying needs no
// store or cache); it always flushes the written files to disk.
func Apply(ctx context.Context, root string, diff []byte, reverse bool, want *Manifest) error {
	return apply(ctx, root, diff, reverse, want, true, nil)
}

func apply(ctx context.Context, root string, diff []byte, reverse bool, want *Manifest, durable bool, tree func() (*Manifest, error)) error {
	files, err := parseDiff(diff)
	if err != nil {
		return err
	}
	if reverse {
		for _, f := range files {
			if err := reverseFile(f); err != nil {
				return err
			}
		}
		// A type change is a deletion then a creation of one path; reversed,
		// the pair must swap back into that order.
		for i := 0; i+1 < len(files); i++ {
			a, b := files[i], files[i+1]
			if a.IsNew && b.IsDelete && a.NewName == b.OldName {
				files[i], files[i+1] = b, a
				i++
			}
		}
	}
	var current *Manifest
	if tree != nil {
		if current, err = tree(); err != nil {
			return fmt.Errorf("apply: hash the current tree: %w", err)
		}
	}
	plan, err := computePlan(ctx, root, files)
	if err != nil {
		return err
	}
	if want != nil {
		if err := checkPlan(plan, want); err != nil {
			return err
		}
	}
	if current != nil {
		if err := checkWholeTree(current, plan, want); err != nil {
			return err
		}
	}
	perms, err := writePlan(root, plan, want, durable)
	if err != nil {
		return err
	}
	paths := make([]string, 0, len(plan))
	if current != nil {
		fixed, err := fixPerms(root, current, want, plan, perms)
		if err != nil {
			return err
		}
		paths = append(paths, fixed...)
	}
	check := want
	if check == nil {
		check = &Manifest{Files: map[string]Entry{}}
		for _, p := range plan {
			if p.exists {
				check.Files[p.path] = entryFor(p.mode, p.data)
			}
		}
	}
	for _, p := range plan {
		paths = append(paths, p.path)
	}
	return verify(root, paths, check, perms)
}

func parseDiff(diff []byte) ([]*gitdiff.File, error) {
	files, _, err := gitdiff.Parse(bytes.NewReader(diff))
	if err != nil {
		return nil, fmt.Errorf("%w: %v (the diff is truncated or damaged; regenerate it)", ErrCorruptDiff, err)
	}
	if len(files) == 0 && len(bytes.TrimSpace(diff)) > 0 {
		return nil, fmt.Errorf("%w: no file sections found in %d bytes (not a git-format diff)", ErrCorruptDiff, len(diff))
	}
	for _, f := range files {
		if f.IsCopy || f.IsRename {
			return nil, fmt.Errorf("%w: copy or rename of %q: decree diffs never contain them", ErrCorruptDiff, f.OldName)
		}
		if !f.IsNew && !f.IsDelete && f.OldName != f.NewName {
			return nil, fmt.Errorf("%w: section names two paths %q and %q", ErrCorruptDiff, f.OldName, f.NewName)
		}
	}
	return files, nil
}

// reverseFile swaps the old and new sides of a parsed file section.
func reverseFile(f *gitdiff.File) error {
	f.OldName, f.NewName = f.NewName, f.OldName
	f.IsNew, f.IsDelete = f.IsDelete, f.IsNew
	f.OldMode, f.NewMode = f.NewMode, f.OldMode
	f.OldOIDPrefix, f.NewOIDPrefix = f.NewOIDPrefix, f.OldOIDPrefix
	for _, frag := range f.TextFragments {
		frag.OldPosition, frag.NewPosition = frag.NewPosition, frag.OldPosition
		frag.OldLines, frag.NewLines = frag.NewLines, frag.OldLines
		frag.LinesAdded, frag.LinesDeleted = frag.LinesDeleted, frag.LinesAdded
		for i := range frag.Lines {
			switch frag.Lines[i].Op {
			case gitdiff.OpAdd:
				frag.Lines[i].Op = gitdiff.OpDelete
			case gitdiff.OpDelete:
				frag.Lines[i].Op = gitdiff.OpAdd
			}
		}
		// A deletion run must precede the addition run it replaces.
		reorderRuns(frag.Lines)
	}
	if f.IsBinary && f.BinaryFragment != nil {
		if f.ReverseBinaryFragment == nil {
			return fmt.Errorf("%w: binary patch for %q has no reverse hunk, so it cannot be reverted", ErrCorruptDiff, f.NewName)
		}
		f.BinaryFragment, f.ReverseBinaryFragment = f.ReverseBinaryFragment, f.BinaryFragment
	}
	return nil
}

// reorderRuns puts, in every run of changed lines, the deleted lines before
// the added ones (a reversed "-a +b" reads "+a -b").
func reorderRuns(lines []gitdiff.Line) {
	for i := 0; i < len(lines); {
		if lines[i].Op == gitdiff.OpContext {
			i++
			continue
		}
		j := i
		for j < len(lines) && lines[j].Op != gitdiff.OpContext {
			j++
		}
		sort.SliceStable(lines[i:j], func(a, b int) bool {
			return lines[i+a].Op == gitdiff.OpDelete && lines[i+b].Op == gitdiff.OpAdd
		})
		i = j
	}
}

func modeFromGit(m os.FileMode) (Mode, bool) {
	switch m {
	case 0:
		return 0, true
	case 0o100644:
		return ModeFile, true
	case 0o100755:
		return ModeExec, true
	case 0o120000:
		return ModeSymlink, true
	}
	// go-gitdiff reports modes as written; accept the fs.FileMode forms too.
	switch {
	case m&fs.ModeSymlink != 0:
		return ModeSymlink, true
	case m.IsRegular() && m.Perm()&0o100 != 0:
		return ModeExec, true
	case m.IsRegular():
		return ModeFile, true
	}
	return 0, false
}

func fullOID(s string) bool { return len(s) == 40 }

// alreadyApplied reports whether p is already in the state section f
// produces, so that an Apply interrupted by a crash can be run again. It
// relies on the full blob id of the result, which decree's diffs carry.
func alreadyApplied(f *gitdiff.File, p *planned, newMode Mode) bool {
	if f.IsDelete {
		return !p.exists && !p.curIsDir
	}
	if !p.exists {
		return false
	}
	if newMode == 0 {
		newMode = p.mode
	}
	if p.mode != newMode {
		return false
	}
	if fullOID(f.NewOIDPrefix) {
		return gitBlobID(p.data) == f.NewOIDPrefix
	}
	// A mode-only change carries no content.
	return !f.IsNew && len(f.TextFragments) == 0 && f.BinaryFragment == nil && f.OldMode != f.NewMode
}

func computePlan(ctx context.Context, root string, files []*gitdiff.File) (map[string]*planned, error) {
	plan := map[string]*planned{}
	for i := 0; i < len(files); i++ {
		f := files[i]
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		name := f.NewName
		if f.IsDelete {
			name = f.OldName
		}
		loc, err := locate(root, name)
		if err != nil {
			return nil, fmt.Errorf("apply: refusing diff path: %w", err)
		}
		if loc.viaLink != "" {
			// Only allowed when this diff removes that symlink first.
			if q, ok := plan[loc.viaLink]; !ok || (q.exists && q.mode == ModeSymlink) {
				return nil, fmt.Errorf("apply: refusing diff path: %w: %q passes through the symlink %q; decree never writes through symlinks", fsutil.ErrUnsafePath, name, loc.viaLink)
			}
		}
		abs := loc.abs
		oldMode, ok1 := modeFromGit(f.OldMode)
		newMode, ok2 := modeFromGit(f.NewMode)
		if !ok1 || !ok2 {
			return nil, fmt.Errorf("%w: %q has unsupported mode %o/%o (only 100644, 100755, 120000)", ErrCorruptDiff, name, f.OldMode, f.NewMode)
		}
		// Current state: from an earlier section of this diff, or the disk.
		p, seen := plan[name]
		if seen {
			if p.exists || !f.IsNew {
				return nil, fmt.Errorf("%w: %q appears twice (only a deletion followed by a creation is allowed)", ErrCorruptDiff, name)
			}
		} else {
			p = &planned{path: name}
			fi := loc.info
			switch {
			case fi == nil:
			case fi.IsDir():
				p.curIsDir = true
				p.curMode = fi.Mode()
			default:
				p.curMode = fi.Mode()
				p.exists = true
				p.mode = ModeOf(fi.Mode())
				if p.mode == ModeSymlink {
					t, err := os.Readlink(abs)
					if err != nil {
						return nil, fmt.Errorf("apply: %s: %w", name, err)
					}
					p.data = []byte(t)
				} else if fi.Mode().IsRegular() {
					p.curFile = true
					if p.data, err = os.ReadFile(abs); err != nil {
						return nil, fmt.Errorf("apply: read %s: %w (make it readable)", name, err)
					}
				} else {
					return nil, fmt.Errorf("%w: %s is neither a file, a symlink nor a directory", ErrConflict, name)
				}
			}
			plan[name] = p
		}
		if alreadyApplied(f, p, newMode) {
			continue
		}
		if f.IsDelete && i+1 < len(files) && files[i+1].IsNew && files[i+1].NewName == name {
			// A type change already carried out: the creation half matches.
			next := files[i+1]
			nm, _ := modeFromGit(next.NewMode)
			if alreadyApplied(next, p, nm) {
				i++
				continue
			}
		}
		if f.IsNew {
			if p.exists {
				return nil, fmt.Errorf("%w: %s already exists but the diff creates it (was it created behind decree's back?)", ErrConflict, name)
			}
		} else {
			if !p.exists {
				return nil, fmt.Errorf("%w: %s is missing but the diff changes it (was it deleted behind decree's back?)", ErrConflict, name)
			}
			if oldMode != 0 && oldMode != p.mode {
				return nil, fmt.Errorf("%w: %s has mode %s but the diff expects %s (changed behind decree's back?)", ErrConflict, name, p.mode, oldMode)
			}
			if fullOID(f.OldOIDPrefix) && gitBlobID(p.data) != f.OldOIDPrefix {
				return nil, fmt.Errorf("%w: %s does not have the content the diff expects (changed behind decree's back?)", ErrConflict, name)
			}
		}
		// With the preimage's full blob id checked, a hunk that does not
		// apply means the diff is damaged, not the tree.
		preimageChecked := !f.IsNew && fullOID(f.OldOIDPrefix)
		var out bytes.Buffer
		if err := gitdiff.Apply(&out, bytes.NewReader(p.data), f); err != nil {
			if errors.Is(err, &gitdiff.Conflict{}) && !preimageChecked {
				return nil, fmt.Errorf("%w: %s: %v (changed behind decree's back?)", ErrConflict, name, err)
			}
			return nil, fmt.Errorf("%w: %s: %v", ErrCorruptDiff, name, err)
		}
		result := out.Bytes()
		if len(f.TextFragments) == 0 && f.BinaryFragment == nil {
			// No content: a mode change, an empty new file, or the deletion
			// of an empty file (which must then be empty, as in git).
			result = p.data
			if f.IsNew {
				result = nil
			}
		}
		if fullOID(f.NewOIDPrefix) && f.NewOIDPrefix != nullBlobID && gitBlobID(result) != f.NewOIDPrefix {
			return nil, fmt.Errorf("%w: %s: the result does not have the content the diff promises", ErrCorruptDiff, name)
		}
		if f.IsDelete {
			if len(result) != 0 {
				return nil, fmt.Errorf("%w: %s: the diff deletes it as empty, but it has content (changed behind decree's back, or a truncated diff?)", ErrConflict, name)
			}
			p.exists, p.data, p.mode = false, nil, 0
			continue
		}
		if newMode == 0 {
			newMode = p.mode
		}
		if newMode == 0 {
			return nil, fmt.Errorf("%w: new file %s has no mode", ErrCorruptDiff, name)
		}
		p.exists, p.data, p.mode = true, bytes.Clone(result), newMode
	}
	return plan, checkLayout(root, plan)
}

// checkLayout makes sure the planned files can coexist: no created path may
// lie below a path that will be a file or symlink, and a directory may only
// be replaced by a file when the diff deletes everything inside it.
func checkLayout(root string, plan map[string]*planned) error {
	for _, p := range plan {
		if !p.exists {
			continue
		}
		for dir := path.Dir(p.path); dir != "."; dir = path.Dir(dir) {
			if q, ok := plan[dir]; ok {
				if q.exists {
					return fmt.Errorf("%w: diff creates %s below %s, which it leaves as a file", ErrCorruptDiff, p.path, dir)
				}
				continue
			}
			fi, err := os.Lstat(filepath.Join(root, filepath.FromSlash(dir)))
			if err == nil && !fi.IsDir() {
				return fmt.Errorf("%w: cannot create %s: %s is a file that the diff does not delete", ErrConflict, p.path, dir)
			}
		}
		if !p.curIsDir {
			continue
		}
		dirAbs := filepath.Join(root, filepath.FromSlash(p.path))
		err := filepath.WalkDir(dirAbs, func(fp string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() {
				return nil
			}
			rel, _ := filepath.Rel(root, fp)
			if q, ok := plan[filepath.ToSlash(rel)]; !ok || q.exists {
				return fmt.Errorf("%w: cannot replace directory %s by a file: it still holds %s", ErrConflict, p.path, filepath.ToSlash(rel))
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

func entryFor(mode Mode, data []byte) Entry {
	sum := sha256.Sum256(data)
	e := Entry{SHA256: hex.EncodeToString(sum[:]), Size: int64(len(data)), Mode: mode}
	if mode == ModeSymlink {
		e.Link = string(data)
	}
	return e
}

// checkPlan compares the planned results with want; every mismatch is named.
func checkPlan(plan map[string]*planned, want *Manifest) error {
	var bad []string
	for _, p := range sortedPlan(plan) {
		e, ok := want.Files[p.path]
		switch {
		case p.exists && !ok:
			bad = append(bad, p.path+" (would exist, manifest has no such file)")
		case !p.exists && ok:
			bad = append(bad, p.path+" (would be missing)")
		case p.exists && entryFor(p.mode, p.data) != e:
			bad = append(bad, p.path+" (content or mode would differ)")
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("%w: applying the diff would not reproduce the manifest; nothing was changed. Mismatched: %s", ErrConflict, strings.Join(bad, ", "))
	}
	return nil
}

// checkWholeTree predicts the tree after the plan and compares it with want
// path by path.
func checkWholeTree(current *Manifest, plan map[string]*planned, want *Manifest) error {
	predicted := make(map[string]Entry, len(current.Files)+len(plan))
	for p, e := range current.Files {
		predicted[p] = e
	}
	for _, p := range plan {
		if p.exists {
			predicted[p.path] = entryFor(p.mode, p.data)
		} else {
			delete(predicted, p.path)
		}
	}
	var bad []string
	for _, ch := range Compare(want, &Manifest{Files: predicted}) {
		switch {
		case ch.Before == nil:
			bad = append(bad, ch.Path+" (would exist; not in the manifest)")
		case ch.After == nil:
			bad = append(bad, ch.Path+" (would be missing)")
		default:
			bad = append(bad, ch.Path+" (would differ from the manifest)")
		}
	}
	if len(bad) == 0 {
		return nil
	}
	shown := bad
	if len(shown) > 50 {
		shown = append(shown[:50:50], fmt.Sprintf("... and %d more", len(bad)-50))
	}
	return fmt.Errorf("%w: after applying, %d path(s) would not match the manifest; nothing was changed (files edited outside decree, or a truncated diff?): %s", ErrConflict, len(bad), strings.Join(shown, ", "))
}

func sortedPlan(plan map[string]*planned) []*planned {
	out := make([]*planned, 0, len(plan))
	for _, p := range plan {
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].path < out[j].path })
	return out
}
