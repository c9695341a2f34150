package pipeline

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/decreehq/decree/controller/events"
	"github.com/decreehq/decree/controller/lease"
	"github.com/decreehq/decree/controller/replica"
	"github.com/decreehq/decree/controller/store"
	"github.com/decreehq/decree/pkg/checkpoint"
	"github.com/decreehq/decree/pkg/fsutil"
	"github.com/decreehq/decree/pkg/layout"
	"github.com/decreehq/decree/pkg/message"
	"github.com/decreehq/decree/pkg/wiremanifest"
	decreev1 "github.com/decreehq/decree/proto/decree/v1"
)

// A message in a lane works on the lane's tree (lane.go) instead of the
// project's: the loop's three tree operations and its dispatches ask
// runLane and go to the lane when the message has one.
//
//   - checkpoint: the lane's manifest now (no walk of any tree);
//   - diff: from the checkpoint to the lane's manifest, both read from the
//     object store;
//   - revert: the lane's manifest is set back;
//   - dispatch: the lane's manifest is published for its replica worker,
//     the assignment waits for that worker (lease.Manager.Reserve), and the
//     worker's returned manifest becomes the lane's tree.
//
// Follow-ups a lane's worker returns are put in the inbox only under
// collectMu, with the attempt's inbox snapshot taken in the same hold,
// so that two lanes collecting at once never take each other's files.

// runLane returns the lane run belongs to, or nil.
func (p *Pipeline) runLane(run *store.Run) *lane {
	if run == nil {
		return nil
	}
	if ln := run.State().Lane; ln != "" {
		return p.laneOf(ln)
	}
	return nil
}

// workLane returns the lane of work for message id ("" for none).
func (p *Pipeline) workLane(id string) *lane {
	if id == "" {
		return nil
	}
	chain, _, ok := message.SplitID(id)
	if !ok {
		return nil
	}
	return p.laneOf(chain)
}

// diffLane writes the diff from manifest to the lane's tree.
func (p *Pipeline) diffLane(ctx context.Context, l *lane, manifest *checkpoint.Manifest, w io.Writer) (*checkpoint.Manifest, error) {
	tree := l.current()
	if err := p.d.Checkpoints.DiffManifestsTo(ctx, manifest, tree, w); err != nil {
		return nil, err
	}
	return tree, nil
}

// revertLane sets the lane's tree back to manifest.
func (p *Pipeline) revertLane(ctx context.Context, l *lane, run *store.Run, manifest *checkpoint.Manifest) error {
	if err := run.Commit(); err != nil {
		return err
	}
	n := len(checkpoint.Compare(l.current(), manifest))
	if err := l.setTree(manifest); err != nil {
		return fmt.Errorf("revert %s: %w", run.ID(), err)
	}
	if n > 0 {
		p.emit(ctx, &events.Event{Kind: events.Reverted, MessageID: run.ID(), Lane: l.chain, Text: fmt.Sprintf("%d path(s) put back in lane %s", n, l.chain)})
	}
	return nil
}

// prepareLane publishes the lane's tree for its worker.
func (p *Pipeline) prepareLane(l *lane, a *lease.Work) (*replicaSync, error) {
	if p.d.Replica == nil {
		return nil, fmt.Errorf("lane %s needs replica workers, but this controller serves none", l.chain)
	}
	tree := l.current()
	digest, release, err := p.d.Replica.Publish(tree)
	if err != nil {
		return nil, err
	}
	a.ManifestDigest = digest
	return &replicaSync{base: tree, release: release, lane: l}, nil
}

// needs sets what a worker needs to take rs's work.
func (rs *replicaSync) needs(need *lease.Requirements) {
	need.InPlace = rs.inPlace
	if rs.lane != nil {
		need.Replica, need.Lane = true, rs.lane.chain
	}
}

// applyLane takes a lane worker's result: its manifest becomes the lane's
// tree, and the lane keeps that worker. Returned files are delivered now,
// under collectMu, unless the caller collects them with the attempt's
// follow-ups (keepFiles).
func (p *Pipeline) applyLane(ctx context.Context, rs *replicaSync, e *store.Entry, run *store.Run, res lease.Result, keepFiles *[]*decreev1.ReturnedFile) error {
	l := rs.lane
	if res.WorkerID != "" {
		p.d.Leases.Reserve(l.chain, res.WorkerID)
	}
	if !res.WorkspaceReturned {
		return nil
	}
	after, err := wiremanifest.FromProto(res.Manifest, 0)
	if err != nil {
		return fmt.Errorf("the workspace manifest of worker %s was refused: %w", res.WorkerID, err)
	}
	var missing []string
	for _, c := range checkpoint.Compare(rs.base, after) {
		if a := c.After; a != nil && a.Mode != checkpoint.ModeSymlink && a.Size > 0 && !p.d.Checkpoints.Store().Has(a.SHA256) {
			missing = append(missing, c.Path)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("%w: worker %s did not upload the new content of %d file(s), e.g. %s; lane %s keeps its tree", replica.ErrMissing, res.WorkerID, len(missing), strings.Join(firstN(missing, 5), ", "), l.chain)
	}
	if err := l.setTree(after); err != nil {
		return err
	}
	if keepFiles != nil {
		*keepFiles = res.Files
		return nil
	}
	p.collectMu.Lock()
	defer p.collectMu.Unlock()
	return p.deliverLaneFiles(ctx, e, run, res.WorkerID, res.Files)
}

// deliverLaneFiles puts a lane worker's returned files in place; the
// caller holds collectMu.
func (p *Pipeline) deliverLaneFiles(ctx context.Context, e *store.Entry, run *store.Run, worker string, files []*decreev1.ReturnedFile) error {
	id, chain, seq := "", "", 0
	if e != nil {
		id, chain, seq = e.ID, e.Chain, e.Seq
	}
	var rd replica.RunDir
	if run != nil {
		rd = run
	}
	notes, err := replica.DeliverFiles(p.d.Store, chain, seq, rd, files)
	for _, n := range notes {
		p.warn(ctx, id, n)
	}
	if err != nil {
		return fmt.Errorf("store the files returned by worker %s: %w", worker, err)
	}
	return nil
}

func firstN(s []string, n int) []string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// requirements returns need with rs's demands added.
func (rs *replicaSync) requirements(need lease.Requirements) lease.Requirements {
	rs.needs(&need)
	return need
}

// laneCollecting holds collectMu for a message in a lane while it collects
// or discards follow-ups outside its attempt (after a restart, an approved
// review); it returns the release. Outside lanes it does nothing.
func (p *Pipeline) laneCollecting(m *msg) func() {
	if m.lane == nil {
		return func() {}
	}
	p.collectMu.Lock()
	return p.collectMu.Unlock
}

// The collection marker.
//
// Inside collectMu a lane's returned follow-ups may sit in the shared
// .decree/outbox/ for a moment. A controller killed then leaves them
// there, and after a restart the first lane to collect would take them as
// its own. So the section is marked (.decree/lanes/collecting, naming the
// message) and, at the next start, outbox files found under a marker are
// moved to that message's run directory (outbox-held/): its collection
// puts them back into the outbox first, and a lost attempt discards them
// with the rest of its follow-ups.

const (
	collectingFile = "collecting"
	heldOutboxDir  = "outbox-held"
)

func (p *Pipeline) markCollecting(id string) error {
	if err := os.MkdirAll(p.lanesRoot(), 0o755); err != nil {
		return err
	}
	if err := fsutil.WriteFileAtomic(filepath.Join(p.lanesRoot(), collectingFile), []byte(id+"\n"), 0o644); err != nil {
		return fmt.Errorf("mark the collection of %s: %w", id, err)
	}
	return nil
}

func (p *Pipeline) unmarkCollecting() {
	_ = os.Remove(filepath.Join(p.lanesRoot(), collectingFile))
}

// adoptOrphanOutbox gives the outbox files a crash left inside a lane's
// collection to the message named by the marker (see above).
func (p *Pipeline) adoptOrphanOutbox() {
	data, err := os.ReadFile(filepath.Join(p.lanesRoot(), collectingFile))
	if err != nil {
		return
	}
	id := strings.TrimSpace(string(data))
	run, err := p.d.Store.OpenRun(id)
	if err == nil {
		dst := filepath.Join(run.Dir(), heldOutboxDir)
		if err := moveMessageFiles(layout.Path(p.d.Store.Root(), layout.Outbox), dst); err != nil {
			p.log.Error("keep the outbox of an interrupted collection", "message", id, "err", err)
			return
		}
	}
	p.unmarkCollecting()
}

// moveHeldOutbox moves run's held outbox files into dir.
func moveHeldOutbox(run *store.Run, dir string) {
	_ = moveMessageFiles(filepath.Join(run.Dir(), heldOutboxDir), dir)
}

// moveMessageFiles moves the message files of src into dst.
func moveMessageFiles(src, dst string) error {
	ents, err := os.ReadDir(src)
	if err != nil {
		return nil
	}
	for _, de := range ents {
		if de.IsDir() || !layout.IsMessageFile(de.Name()) {
			continue
		}
		if err := os.MkdirAll(dst, 0o755); err != nil {
			return err
		}
		if err := os.Rename(filepath.Join(src, de.Name()), filepath.Join(dst, de.Name())); err != nil {
			return err
		}
	}
	return nil
}
