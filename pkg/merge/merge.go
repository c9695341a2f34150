// Package merge merges two trees recorded as checkpoint manifests: the
// change a parallel chain made (from its starting manifest, base, to its
// lane's final manifest, theirs) into the project's current manifest
// (ours), as a three-way merge over the checkpoint object store. No tree on
// disk and no git is needed.
//
// Every path (file or symlink) is merged on its own:
//   - unchanged on one side: the other side's entry is taken, deletion
//     included; the same result on both sides: taken once;
//   - a regular file changed on both sides: its content and its
//     permission bits (git's 644/755 mode and the exact bits of
//     Manifest.Perms together) are merged separately, each taking the side
//     that changed it, so that a mode change on one side and an edit on the
//     other both land; two different new permissions conflict ("mode
//     changed differently");
//   - content changed on both sides is merged line by line as `git
//     merge-file` merges it (diff3: non-overlapping changes merge, changes
//     that overlap or touch, meaning one ends on the line where the other
//     starts or both insert at one place, conflict unless both leave the
//     same text; lines keep their "\r\n", and a last line without "\n" is
//     a different line from the same text with it, as in git). The merged
//     content is written to the store;
//   - everything else changed differently on both sides is a conflict:
//     binary content (a NUL byte, or over 8 MiB: checkpoint's
//     StreamThreshold) changed on both sides, a symlink changed on both
//     sides, both added with different content or modes, deleted on one
//     side and changed on the other;
//   - paths merged cleanly one by one can still clash: a file on one side
//     where the other has a directory (x and x/y) is a conflict on the
//     path the merge would have brought in.
//
// Where several line diffs are equally short, the one chosen decides
// whether two changes touch; the line diff makes git's choices
// (linediff.go), and tests hold Trees to git merge-file's verdict and bytes
// on thousands of random merges. Only diffs needing a search longer than
// max(256, 2*sqrt(lines)) steps may still be cut where git cuts them
// differently.
//
// A conflict names the path and what both sides did ("here" is ours, the
// project; "the chain" is theirs); line numbers in it are the base's. With any conflict no tree is returned: nothing is half
// merged. Content missing from the store is an error, not a conflict.
package merge

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strings"

	"github.com/decreehq/decree/pkg/checkpoint"
)

// Result is the outcome of Trees.
type Result struct {
	// Tree is ours with theirs' changes; nil when Conflicts is not empty.
	Tree *checkpoint.Manifest
	// Changed lists the paths whose entry or permission bits in Tree
	// differ from ours, sorted (also filled when there are conflicts: the
	// paths that would change).
	Changed []string
	// Conflicts is sorted by path; empty for a clean merge.
	Conflicts []Conflict
}

// Conflict is a path both sides changed in ways that do not merge. Reason
// says what both sides did: "both changed lines 3-4", "deleted here,
// changed by the chain", "both added with different content", "binary file
// changed on both sides", "mode changed differently", ...
type Conflict struct {
	Path, Reason string
}

// Trees merges theirs' change from base into ours. The manifests are not
// modified; the result keeps ours' ExactPerms.
func Trees(ctx context.Context, st *checkpoint.Store, base, ours, theirs *checkpoint.Manifest) (*Result, error) {
	if st == nil || base == nil || ours == nil || theirs == nil {
		return nil, errors.New("merge: store and all three manifests are required")
	}
	paths := map[string]bool{}
	for _, m := range []*checkpoint.Manifest{base, ours, theirs} {
		for p := range m.Files {
			paths[p] = true
		}
	}
	sorted := make([]string, 0, len(paths))
	for p := range paths {
		sorted = append(sorted, p)
	}
	sort.Strings(sorted)
	tree := &checkpoint.Manifest{Files: make(map[string]checkpoint.Entry, len(ours.Files)), ExactPerms: ours.ExactPerms}
	for p, e := range ours.Files {
		tree.Files[p] = e
		if perm, ok := ours.Perms[p]; ok && e.Mode != checkpoint.ModeSymlink {
			setPerm(tree, p, perm)
		}
	}
	res := &Result{}
	for _, p := range sorted {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		b, o, t := stateOf(base, p), stateOf(ours, p), stateOf(theirs, p)
		var got state
		switch {
		case t == b, o == t:
			continue
		case o == b:
			got = t
		default:
			var reason string
			var err error
			got, reason, err = both(st, p, b, o, t)
			if err != nil {
				return nil, err
			}
			if reason != "" {
				res.Conflicts = append(res.Conflicts, Conflict{Path: p, Reason: reason})
				continue
			}
			if got == o {
				continue
			}
		}
		if got.ok && got.e.Mode != checkpoint.ModeSymlink && !st.Has(got.e.SHA256) {
			return nil, fmt.Errorf("merge %s: content %s is not in the object store %s (pruned, or the lane's snapshot did not complete); nothing was merged", p, got.e.SHA256, st.Dir())
		}
		res.Changed = append(res.Changed, p)
		put(tree, p, got)
	}
	res.Conflicts = append(res.Conflicts, fileDirConflicts(tree, res.Changed)...)
	sort.SliceStable(res.Conflicts, func(i, j int) bool { return res.Conflicts[i].Path < res.Conflicts[j].Path })
	if len(res.Conflicts) == 0 {
		res.Tree = tree
	}
	return res, nil
}

// fileDirConflicts finds the changed paths that the merge made a file
// where the other side has a directory, or put under a path the other
// side has as a file: each side's tree is valid, their union may not be.
func fileDirConflicts(tree *checkpoint.Manifest, changed []string) []Conflict {
	var out []Conflict
	var paths []string
	for _, p := range changed {
		if _, ok := tree.Files[p]; !ok {
			continue
		}
		for dir := path.Dir(p); dir != "."; dir = path.Dir(dir) {
			if _, ok := tree.Files[dir]; ok {
				out = append(out, Conflict{Path: p, Reason: fmt.Sprintf("a file in directory %s, which the other side has as a file", dir)})
				break
			}
		}
		if paths == nil {
			paths = tree.Paths()
		}
		i := sort.SearchStrings(paths, p+"/")
		if i < len(paths) && strings.HasPrefix(paths[i], p+"/") {
			out = append(out, Conflict{Path: p, Reason: fmt.Sprintf("a file where the other side has a directory (%s)", paths[i])})
		}
	}
	return out
}

// state is one path in one manifest: present or not, its entry and its
// permission bits (0 for a symlink).
type state struct {
	ok   bool
	e    checkpoint.Entry
	perm fs.FileMode
}

func stateOf(m *checkpoint.Manifest, p string) state {
	e, ok := m.Files[p]
	if !ok {
		return state{}
	}
	return state{ok: true, e: e, perm: m.PermOf(p)}
}

func put(m *checkpoint.Manifest, p string, s state) {
	delete(m.Perms, p)
	if !s.ok {
		delete(m.Files, p)
		return
	}
	m.Files[p] = s.e
	if s.e.Mode != checkpoint.ModeSymlink {
		setPerm(m, p, s.perm)
	}
}

// setPerm records perm in m.Perms when it is not the mode's default.
func setPerm(m *checkpoint.Manifest, p string, perm fs.FileMode) {
	perm &= fs.ModePerm
	if perm == m.Files[p].Mode.Perm() {
		delete(m.Perms, p)
		return
	}
	if m.Perms == nil {
		m.Perms = map[string]fs.FileMode{}
	}
	m.Perms[p] = perm
}
