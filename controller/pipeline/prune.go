package pipeline

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"

	"github.com/decreehq/decree/controller/store"
	"github.com/decreehq/decree/pkg/checkpoint"
	"github.com/decreehq/decree/pkg/layout"
)

// pruneObjects removes from .decree/objects the file contents that no run
// can need any more, so the store stops growing with every attempt. It runs
// between runs, while no attempt is under way: when the inbox runs empty
// and every pruneEvery finished runs.
//
// What is kept, and why:
//
//   - the tree as it is now (a fresh snapshot): the stat cache promises
//     that the blob of every unchanged file is stored, and the next run's
//     diffs read the old side of a change from the store;
//   - manifest.json of every unfinished run (no outcome in state.json: an
//     attempt interrupted by a restart, or a run whose message waits in the
//     inbox for `process`): its next attempt, its final revert, and a
//     cancellation diff the tree against that manifest, and a diff reads
//     the manifest's contents from the store;
//   - manifest.json of a run whose state.json cannot be read: when in
//     doubt, keep.
//
// Not kept: the manifests of finished runs (succeeded, dead-lettered,
// cancelled) and the intermediate trees of attempts. A finished run needs no
// blob: reverting a completed message applies its changes.diff in reverse
// and checks the result against the hashes in manifest.json, and a requeued
// dead letter starts a fresh run (the old directory becomes
// runs/<id>.prev-N/) with a new checkpoint. Store.Prune keeps a pack that
// is mostly live, so some dead contents stay until more of their pack dies.
//
// A failure to read any kept manifest cancels the prune: nothing is removed
// unless everything that must stay is known.
func pruneObjects(ctx context.Context, st *store.Store, cp *checkpoint.Checkpointer) (int, error) {
	tree, err := cp.Snapshot(ctx, st.Root())
	if err != nil {
		return 0, fmt.Errorf("prune the object store: snapshot the tree: %w", err)
	}
	keep, err := unfinishedManifests(st)
	if err != nil {
		return 0, fmt.Errorf("prune the object store: %w", err)
	}
	return cp.Store().Prune(append(keep, tree)...)
}

// unfinishedManifests reads manifest.json of every run without an outcome
// (or whose state cannot be read), as the store keeps them: the history of
// finished runs is not read. Archived runs (<id>.prev-N) are finished.
func unfinishedManifests(st *store.Store) ([]*checkpoint.Manifest, error) {
	var out []*checkpoint.Manifest
	for _, id := range st.UnfinishedRuns() {
		m, err := checkpoint.ReadManifest(filepath.Join(st.Dir(), layout.Runs, id, layout.ManifestFile))
		if errors.Is(err, fs.ErrNotExist) {
			continue // no checkpoint taken yet
		}
		if err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	return out, nil
}

// pruneEvery is how many finished runs may leave their objects behind
// before the loop prunes while still busy. A prune costs a walk of the
// tree and a read of every unfinished run's manifest, about what one
// checkpoint costs, so it is not paid per message: the loop prunes when
// the inbox runs empty (idle) and every pruneEvery runs in between. The
// store then holds at most the contents of pruneEvery runs' changes more
// than it must.
const pruneEvery = 32

// pruneBusy prunes, between two messages, when pruneEvery runs finished
// since the last prune. Only the loop prunes (a run finished by a
// cancellation from the API is only counted), so no attempt is under way.
func (p *Pipeline) pruneBusy(ctx context.Context) {
	if p.unpruned.Load() >= pruneEvery {
		p.prune(ctx)
	}
}

// pruneIdle prunes when any run finished since the last prune.
func (p *Pipeline) pruneIdle(ctx context.Context) {
	if p.unpruned.Load() > 0 {
		p.prune(ctx)
	}
}

// prune runs pruneObjects and logs the outcome; a failure is only logged
// (the store keeps growing until the next successful prune).
func (p *Pipeline) prune(ctx context.Context) {
	if p.d.Checkpoints == nil {
		return
	}
	p.unpruned.Store(0)
	n, err := pruneObjects(ctx, p.d.Store, p.d.Checkpoints)
	if err != nil {
		p.log.Warn("object store not pruned", "err", err)
		return
	}
	p.log.Debug("object store pruned", "blobs removed", n)
}
