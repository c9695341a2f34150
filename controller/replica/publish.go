package replica

import (
	"sort"

	"github.com/decreehq/decree/pkg/checkpoint"
	"github.com/decreehq/decree/pkg/wiremanifest"
	decreev1 "github.com/decreehq/decree/proto/decree/v1"
)

// pubState is what Publish derived from one tree: the wire entries of the
// tree and its context files, grouped in the digest's buckets (each
// sorted by path), the bucket sums and the digest. The next Publish starts
// from the last state and redoes only the buckets of the paths that
// changed since (checkpoint.ChangedSince, for the snapshots of a served
// tree), so publishing costs O(changes), not O(tree). States are never
// modified once built: publications share their entries.
type pubState struct {
	tree    *checkpoint.Manifest
	ctx     map[string]ctxFile
	buckets *[wiremanifest.DigestBuckets][]*decreev1.FileEntry
	sums    *wiremanifest.BucketSums
	digest  string
	count   int
	index   *blobIndex
}

// entry returns the published entry at path (binary search in its bucket).
func (st *pubState) entry(path string) *decreev1.FileEntry {
	b := st.buckets[wiremanifest.BucketOf(path)]
	i := sort.Search(len(b), func(i int) bool { return b[i].GetPath() >= path })
	if i < len(b) && b[i].GetPath() == path {
		return b[i]
	}
	return nil
}

// entries lists every entry, bucket by bucket (the digest's order).
func (st *pubState) entries() []*decreev1.FileEntry {
	out := make([]*decreev1.FileEntry, 0, st.count)
	for _, b := range st.buckets {
		out = append(out, b...)
	}
	return out
}

// combined returns the entry path has in tree plus context files (a
// context file wins), or nil.
func combined(tree *checkpoint.Manifest, ctx map[string]ctxFile, path string) *checkpoint.Entry {
	if c, ok := ctx[path]; ok {
		return &c.entry
	}
	if e, ok := tree.Files[path]; ok {
		return &e
	}
	return nil
}

// buildState builds the state of tree and ctx from prev (nil: from
// scratch).
func buildState(prev *pubState, tree *checkpoint.Manifest, ctx map[string]ctxFile) *pubState {
	if prev == nil {
		return fullState(tree, ctx)
	}
	changed := changedPaths(prev, tree, ctx)
	if len(changed) == 0 {
		st := *prev
		st.tree, st.ctx = tree, ctx
		return &st
	}
	st := &pubState{tree: tree, ctx: ctx, count: prev.count}
	buckets, sums := *prev.buckets, *prev.sums // copies of the arrays: 56 KiB
	st.buckets, st.sums = &buckets, &sums
	byBucket := map[int]map[string]bool{}
	for _, p := range changed {
		b := wiremanifest.BucketOf(p)
		if byBucket[b] == nil {
			byBucket[b] = map[string]bool{}
		}
		byBucket[b][p] = true
	}
	var fresh []*decreev1.FileEntry
	for b, paths := range byBucket {
		old := buckets[b]
		next := make([]*decreev1.FileEntry, 0, len(old)+len(paths))
		for _, fe := range old {
			if !paths[fe.GetPath()] {
				next = append(next, fe)
			}
		}
		for p := range paths {
			e := combined(tree, ctx, p)
			if e == nil {
				continue
			}
			if fe := prev.entry(p); fe != nil && sameEntry(fe, p, *e) {
				next = append(next, fe) // unchanged: keep the pointer
				continue
			}
			fe := wiremanifest.EntryToProto(p, *e)
			next = append(next, fe)
			fresh = append(fresh, fe)
		}
		sort.Slice(next, func(i, j int) bool { return next[i].GetPath() < next[j].GetPath() })
		st.count += len(next) - len(old)
		buckets[b] = next
		sums[b] = wiremanifest.BucketSum(next)
	}
	st.digest = sums.Digest()
	if st.index = prev.index.extend(fresh, st.count); st.index == nil {
		st.index = newBlobIndex(st)
	}
	return st
}

// sameEntry reports whether fe is the wire form of e at path p.
func sameEntry(fe *decreev1.FileEntry, p string, e checkpoint.Entry) bool {
	w := wiremanifest.EntryToProto(p, e)
	return fe.GetSha256() == w.GetSha256() && fe.GetSize() == w.GetSize() && fe.GetMode() == w.GetMode() && fe.GetLinkTarget() == w.GetLinkTarget()
}

// changedPaths lists the paths whose combined entry may differ between
// prev and (tree, ctx): the checkpoint's record of the paths changed since
// prev's tree when it has one, else a full comparison of the two trees;
// and the context files that differ.
func changedPaths(prev *pubState, tree *checkpoint.Manifest, ctx map[string]ctxFile) []string {
	var out []string
	if prev.tree != tree {
		if paths, ok := checkpoint.ChangedSince(prev.tree, tree); ok {
			out = paths
		} else {
			// Another manifest (a lane's tree): compare the two maps
			// (no allocation per entry, as Compare's would).
			for p, e := range tree.Files {
				if old, ok := prev.tree.Files[p]; !ok || old != e {
					out = append(out, p)
				}
			}
			for p := range prev.tree.Files {
				if _, ok := tree.Files[p]; !ok {
					out = append(out, p)
				}
			}
		}
	}
	for p, c := range ctx {
		if old, ok := prev.ctx[p]; !ok || old.entry != c.entry {
			out = append(out, p)
		}
	}
	for p := range prev.ctx {
		if _, ok := ctx[p]; !ok {
			out = append(out, p)
		}
	}
	return out
}

// fullState builds the state of tree and ctx from scratch.
func fullState(tree *checkpoint.Manifest, ctx map[string]ctxFile) *pubState {
	st := &pubState{tree: tree, ctx: ctx,
		buckets: new([wiremanifest.DigestBuckets][]*decreev1.FileEntry), sums: new(wiremanifest.BucketSums)}
	add := func(p string, e checkpoint.Entry) {
		b := wiremanifest.BucketOf(p)
		st.buckets[b] = append(st.buckets[b], wiremanifest.EntryToProto(p, e))
	}
	for p, e := range tree.Files {
		if _, isCtx := ctx[p]; !isCtx {
			add(p, e)
		}
	}
	for p, c := range ctx {
		add(p, c.entry)
	}
	for b, entries := range st.buckets {
		sort.Slice(entries, func(i, j int) bool { return entries[i].GetPath() < entries[j].GetPath() })
		st.sums[b] = wiremanifest.BucketSum(entries)
		st.count += len(entries)
	}
	st.digest = st.sums.Digest()
	st.index = newBlobIndex(st)
	return st
}

// blobIndex finds, for SendBlobs, a path whose file has a given content in
// a published state. base maps the contents of some earlier state to a
// path; overlay those of the entries written since. Either may name a path
// that changed later, so every answer is checked against the state; a
// content neither finds (held by another path than the one recorded, or
// not published at all) is looked up in a full map of the state, built
// once when first needed. Each state extends its predecessor's overlay
// (O(changes)) until it grows past an eighth of the tree, when the index is
// rebuilt (O(tree), once in that many changes).
type blobIndex struct {
	base, overlay map[string]string
}

func newBlobIndex(st *pubState) *blobIndex {
	ix := &blobIndex{base: make(map[string]string, st.count)}
	for _, b := range st.buckets {
		for _, fe := range b {
			if fe.GetMode() != wiremanifest.WireSymlink {
				ix.base[fe.GetSha256()] = fe.GetPath()
			}
		}
	}
	return ix
}

// extend returns the index with the entries of fresh added, or nil when
// it should be rebuilt.
func (ix *blobIndex) extend(fresh []*decreev1.FileEntry, count int) *blobIndex {
	if len(fresh) == 0 {
		return ix
	}
	if len(ix.overlay)+len(fresh) > count/8+64 {
		return nil
	}
	next := &blobIndex{base: ix.base, overlay: make(map[string]string, len(ix.overlay)+len(fresh))}
	for k, v := range ix.overlay {
		next.overlay[k] = v
	}
	for _, fe := range fresh {
		if fe.GetMode() != wiremanifest.WireSymlink {
			next.overlay[fe.GetSha256()] = fe.GetPath()
		}
	}
	return next
}

// holds reports whether the entry at path in st is a regular file with
// content sum.
func (st *pubState) holds(path, sum string) bool {
	fe := st.entry(path)
	return fe != nil && fe.GetSha256() == sum && fe.GetMode() != wiremanifest.WireSymlink
}
