// Package merge is a TEMPORARY placeholder (manifest-level three-way merge
// only) until the real package lands.
package merge

import (
	"context"
	"sort"

	"github.com/decreehq/decree/pkg/checkpoint"
)

type Conflict struct{ Path, Reason string }

type Result struct {
	Tree      *checkpoint.Manifest
	Changed   []string
	Conflicts []Conflict
}

func Trees(ctx context.Context, st *checkpoint.Store, base, ours, theirs *checkpoint.Manifest) (*Result, error) {
	out := &checkpoint.Manifest{Files: map[string]checkpoint.Entry{}, ExactPerms: ours.ExactPerms}
	for p, e := range ours.Files {
		out.Files[p] = e
	}
	paths := map[string]bool{}
	for p := range base.Files {
		paths[p] = true
	}
	for p := range theirs.Files {
		paths[p] = true
	}
	res := &Result{}
	for p := range paths {
		b, bok := base.Files[p]
		t, tok := theirs.Files[p]
		o, ook := ours.Files[p]
		if bok == tok && b == t {
			continue
		}
		if (ook == tok && o == t) || (ook == bok && o == b) {
			if tok {
				out.Files[p] = t
			} else {
				delete(out.Files, p)
			}
			if !(ook == tok && o == t) {
				res.Changed = append(res.Changed, p)
			}
			continue
		}
		res.Conflicts = append(res.Conflicts, Conflict{Path: p, Reason: "changed on both sides"})
	}
	sort.Strings(res.Changed)
	sort.Slice(res.Conflicts, func(i, j int) bool { return res.Conflicts[i].Path < res.Conflicts[j].Path })
	if len(res.Conflicts) == 0 {
		res.Tree = out
	}
	return res, nil
}
