package checkpoint

import "sort"

// maxHistory bounds how many snapshots back ChangedSince follows.
const maxHistory = 64

// ChangedSince returns, sorted, the paths whose entries may differ
// between before and after (a superset: a path may be listed and be
// unchanged) when after was made from before by the snapshots of a served
// root (see Serve), through at most 64 snapshots that are all still in
// memory. It reads only those paths: O(changes). ok is false when that
// history is not known (after was not made from before, or by a walk, or
// an intermediate manifest was freed): compare the two with Compare then.
// The same manifest twice has no changes.
func ChangedSince(before, after *Manifest) (paths []string, ok bool) {
	if before == nil || after == nil {
		return nil, false
	}
	seen := map[string]struct{}{}
	cur := after
	for range maxHistory {
		if cur == before {
			paths = make([]string, 0, len(seen))
			for p := range seen {
				paths = append(paths, p)
			}
			sort.Strings(paths)
			return paths, true
		}
		if cur.delta == nil {
			return nil, false
		}
		for p := range cur.delta {
			seen[p] = struct{}{}
		}
		if cur = cur.base.Value(); cur == nil {
			return nil, false
		}
	}
	return nil, false
}
