package pipeline

import (
	"context"
	"fmt"

	"github.com/decreehq/decree/controller/lease"
	"github.com/decreehq/decree/controller/replica"
	"github.com/decreehq/decree/controller/store"
	"github.com/decreehq/decree/pkg/checkpoint"
)

// replicaSync is the state of one assignment that a replica worker may
// take: the tree's manifest published for it before dispatch.
type replicaSync struct {
	base    *checkpoint.Manifest
	release func()
	// inPlace is set when no manifest was published: the assignment may
	// then go only to in-place workers.
	inPlace bool
	// lane is set for work of a message in a lane (lane_tree.go).
	lane *lane
}

// inPlaceOnly reports whether work must go to in-place workers: when the
// controller has no replica service.
func (p *Pipeline) inPlaceOnly() bool { return p.d.Replica == nil }

// onlyInPlaceConnected reports whether at least one in-place worker and no
// replica worker is connected.
func (p *Pipeline) onlyInPlaceConnected() bool {
	inPlace := false
	for _, w := range p.d.Leases.Workers() {
		if !w.GetConnected() {
			continue
		}
		if !w.GetInPlace() {
			return false
		}
		inPlace = true
	}
	return inPlace
}

// prepareReplica snapshots the tree and publishes its manifest, setting
// a.ManifestDigest so that a replica worker can sync to it. It does
// nothing, and restricts the assignment to in-place workers, when there is
// no replica service, or when in-place workers are connected and no
// replica worker is (the common single-machine case, where the snapshot
// would cost a tree walk per dispatch for nothing). Call done when the
// assignment ended.
func (p *Pipeline) prepareReplica(ctx context.Context, a *lease.Work) (*replicaSync, error) {
	if l := p.workLane(a.MessageID); l != nil {
		return p.prepareLane(l, a)
	}
	if p.d.Replica == nil || p.onlyInPlaceConnected() {
		return &replicaSync{release: func() {}, inPlace: true}, nil
	}
	m, err := p.d.Checkpoints.Snapshot(ctx, p.d.Store.Root())
	if err != nil {
		return nil, fmt.Errorf("snapshot the tree for replica workers: %w", err)
	}
	digest, release, err := p.d.Replica.Publish(m)
	if err != nil {
		return nil, err
	}
	a.ManifestDigest = digest
	return &replicaSync{base: m, release: release}, nil
}

func (r *replicaSync) done() {
	if r != nil && r.release != nil {
		r.release()
	}
}

// applyReplica takes a replica worker's result into the controller's
// tree and stores its returned files. In-place results pass untouched. e
// and run are nil for work outside a message. A result that cannot be
// applied is returned as an error, which fails the attempt.
func (p *Pipeline) applyReplica(ctx context.Context, rs *replicaSync, e *store.Entry, run *store.Run, res lease.Result) error {
	if rs != nil && rs.lane != nil {
		return p.applyLane(ctx, rs, e, run, res, nil)
	}
	if !res.WorkspaceReturned || p.d.Replica == nil || rs == nil || rs.base == nil {
		return nil
	}
	applied, err := p.d.Replica.Materialize(ctx, rs.base, res.Manifest)
	id, chain, seq := "", "", 0
	if e != nil {
		id, chain, seq = e.ID, e.Chain, e.Seq
	}
	if err != nil {
		return fmt.Errorf("apply the changes of replica worker %s: %w", res.WorkerID, err)
	}
	p.log.Info("replica changes applied", "message", id, "worker", res.WorkerID, "written", len(applied.Written), "deleted", len(applied.Deleted))
	var rd replica.RunDir
	if run != nil {
		rd = run
	}
	notes, err := replica.DeliverFiles(p.d.Store, chain, seq, rd, res.Files)
	for _, n := range notes {
		p.warn(ctx, id, n)
	}
	if err != nil {
		return fmt.Errorf("store the files returned by replica worker %s: %w", res.WorkerID, err)
	}
	return nil
}
