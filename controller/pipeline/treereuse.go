package pipeline

import (
	"context"
	"time"

	"github.com/decreehq/decree/controller/lease"
	"github.com/decreehq/decree/pkg/checkpoint"
)

// Reusing the tree read at the end of an attempt as the next message's
// checkpoint.
//
// Checking an attempt's changes walks the whole tree (writeDiff), and the
// next message's checkpoint walks it again a few milliseconds later; in
// between, the loop only files the message and picks the next, all inside
// .decree/, which checkpoints exclude. When the loop goes straight on, the
// second walk would read what the first one did, so the checkpoint takes
// the first walk's manifest (its contents are in the object store) and
// halves the walking per message.
//
// The manifest is dropped, and the next checkpoint walks the tree, when
// anything may have changed the tree since the walk: a revert, work handed
// to a worker outside an attempt (a router, a pre-check, a batch hook), the
// loop waiting for work, or when it is older than treeReuseWindow. A
// person editing files while messages run is the one change it cannot
// see: an edit that lands in those few milliseconds counts as part of the
// next message's attempt, as an edit a moment later does anyway.
const treeReuseWindow = time.Second

type treeRead struct {
	m  *checkpoint.Manifest
	at time.Time
}

// keepTree records the tree as read at the end of an attempt.
func (p *Pipeline) keepTree(m *checkpoint.Manifest) {
	if m != nil {
		p.lastTree.Store(&treeRead{m: m, at: time.Now()})
	}
}

// forgetTree drops the recorded tree: something may change it.
func (p *Pipeline) forgetTree() { p.lastTree.Store(nil) }

// recentTree takes the recorded tree if it is fresh enough.
func (p *Pipeline) recentTree() (*checkpoint.Manifest, bool) {
	t := p.lastTree.Swap(nil)
	if t == nil || time.Since(t.at) > treeReuseWindow {
		return nil, false
	}
	return t.m, true
}

// dispatch hands work to a worker. Any work may change the tree, so the
// recorded tree is dropped first (an attempt's own read comes after it).
func (p *Pipeline) dispatch(ctx context.Context, a *lease.Work, need lease.Requirements) (lease.Result, error) {
	p.forgetTree()
	return p.d.Leases.Dispatch(ctx, a, need)
}
