package pipeline

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/decreehq/decree/controller/events"
	"github.com/decreehq/decree/controller/sched"
	"github.com/decreehq/decree/controller/store"
	"github.com/decreehq/decree/pkg/config"
)

// Parallel chains.
//
// With `parallel: N` (N > 1) in config.yml and at least one replica worker
// connected, up to N chains run at once. Each gets a lane (lane.go): a tree
// of its own that starts as the project tree when the chain's first message
// is taken, on one worker for the chain's whole length (lease.Reserve).
// Inside a lane everything is as in the one-at-a-time loop: depth-first,
// checkpoints, retries, reverts and dead letters, all against the lane's
// tree. When the chain has no message left, its net change (the lane's
// tree against where it started) joins the merge queue (merge.go), which
// merges finished chains into the project tree one at a time.
//
// Which chains run together: any two chains may, in the order the inbox
// gives them (oldest chain first), because a chain only ever sees its own
// lane and the merge checks the result. What must see the project tree
// itself runs alone, with no lane open and none waiting to merge: a
// migration (migrations stay serial and in order), a message whose
// frontmatter says `parallel: false`, and a message whose earlier attempts
// ran on the project tree. Such a message is a barrier: while it is the
// oldest work queued, no new lane opens; it waits for the open lanes to be
// merged, runs, and then lanes open again.
//
// With `parallel: 1` (the default), or while no replica worker is
// connected, nothing of this runs: one message at a time on the project
// tree, exactly as before.

// parallelOn reports whether lanes may open now.
func (p *Pipeline) parallelOn(cfg *config.Config) bool {
	return cfg.Parallel > 1 && p.d.Replica != nil && p.replicaConnected()
}

// replicaConnected reports whether a replica worker is connected.
func (p *Pipeline) replicaConnected() bool {
	for _, w := range p.d.Leases.Workers() {
		if w.GetConnected() && !w.GetInPlace() {
			return true
		}
	}
	return false
}

// serialOnly reports whether e must run on the project tree, alone.
func (p *Pipeline) serialOnly(cfg *config.Config, e store.Entry) bool {
	if migrationOf(cfg, e) != "" || e.Message.GetString("to") != "" {
		return true
	}
	if v, ok := e.Message.Get("parallel"); ok {
		if b, isBool := v.(bool); (isBool && !b) || fmt.Sprint(v) == "false" {
			return true
		}
	}
	if run, err := p.d.Store.OpenRun(e.ID); err == nil {
		if st := run.State(); st.Lane == "" && len(st.Attempts) > 0 {
			return true // it started on the project tree
		}
	}
	return false
}

// excludedOrLane leaves alone chains that wait, are held, or have a lane.
func (p *Pipeline) excludedOrLane(chain string) bool {
	return p.excluded(chain) || p.laneOf(chain) != nil
}

// parallelTurn is one turn of the loop while lanes may run: it opens a
// lane for the next chain when one is free, runs a barrier message when
// no lane is open, or waits. False when ctx ended.
func (p *Pipeline) parallelTurn(ctx context.Context, cfg *config.Config, busy *bool) bool {
	running, merging := p.lanesOpen()
	if running >= cfg.Parallel || !p.parallelOn(cfg) && running+merging > 0 {
		p.advanceJobs(ctx)
		p.flushHeld(ctx)
		return p.idle(ctx)
	}
	sel, err := p.d.Sched.Next(sched.NextOptions{Chains: p.chainFilter(), Exclude: p.excludedOrLane})
	if err != nil {
		p.log.Error("select next message", "err", err)
		return p.idle(ctx)
	}
	p.announceRejected(ctx, sel)
	if !sel.Found {
		if running+merging == 0 {
			if *busy {
				*busy = false
				p.runBatchHook(ctx, cfg, "afterAll")
			}
			p.pruneIdle(ctx)
		}
		p.advanceJobs(ctx)
		p.flushHeld(ctx)
		return p.idle(ctx)
	}
	p.flushHeld(ctx)
	if !*busy {
		*busy = true
		p.runBatchHook(ctx, cfg, "beforeAll")
	}
	e := sel.Entry
	if p.serialOnly(cfg, e) || !p.parallelOn(cfg) {
		if running+merging > 0 {
			// A barrier: it runs once every open lane is merged.
			if err := p.d.Sched.Finish(e.ID); err != nil {
				p.log.Error("finish message", "id", e.ID, "err", err)
			}
			p.advanceJobs(ctx)
			return p.idle(ctx)
		}
		p.processOne(ctx, cfg, e)
		return true
	}
	l, err := p.openLane(ctx, e)
	if ferr := p.d.Sched.Finish(e.ID); ferr != nil {
		p.log.Error("finish message", "id", e.ID, "err", ferr)
	}
	if err != nil {
		p.warn(ctx, e.ID, fmt.Sprintf("%v; the chain waits and is tried again", err))
		return p.idle(ctx)
	}
	p.startLane(ctx, l)
	return true
}

// processOne runs e on the project tree, as the one-at-a-time loop does.
func (p *Pipeline) processOne(ctx context.Context, cfg *config.Config, e store.Entry) {
	p.work.Lock()
	p.process(ctx, cfg, e)
	p.work.Unlock()
	if err := p.d.Sched.Finish(e.ID); err != nil {
		p.log.Error("finish message", "id", e.ID, "err", err)
	}
	p.chainMaybeFinished(ctx, e.Chain)
	p.pruneBusy(ctx)
	p.advanceJobs(ctx)
}

// announceRejected reports the files Next dead-lettered on the way.
func (p *Pipeline) announceRejected(ctx context.Context, sel sched.Selection) {
	for _, r := range sel.Rejected {
		p.emit(ctx, &events.Event{Kind: events.MessageDead, MessageID: r.ID, Chain: r.Chain,
			JobID: p.rejectedInJob(r.Chain, r.File), Text: fmt.Sprintf("%s: %s", r.Note.Reason, firstLine(r.Note.Detail))})
		p.chainMaybeFinished(ctx, r.Chain)
	}
}

// openLane gives e's chain a lane starting from the project tree now.
func (p *Pipeline) openLane(ctx context.Context, e store.Entry) (*lane, error) {
	p.treeMu.Lock() // not during a merge (merge.go)
	base, err := p.d.Checkpoints.Snapshot(ctx, p.d.Store.Root())
	p.treeMu.Unlock()
	if err != nil {
		return nil, fmt.Errorf("open a lane for chain %s: snapshot the project tree: %w", e.Chain, err)
	}
	info := laneInfo{Chain: e.Chain, Opened: time.Now().UTC(), Root: e.File}
	if of := e.Message.GetString(retryOfKey); of != "" && e.Seq == 0 {
		info.RetryOf, info.Retry = of, 1
	}
	l, err := p.createLane(info, base)
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	p.lanes[l.chain] = l
	p.mu.Unlock()
	p.emit(ctx, &events.Event{Kind: events.LaneOpened, Chain: e.Chain, MessageID: e.ID, Lane: l.chain,
		Text: fmt.Sprintf("chain %s runs in a lane of its own from the project tree as it is now (%d files)", e.Chain, len(base.Files))})
	return l, nil
}

// startLane runs the lane's chain in a goroutine, then queues its merge.
func (p *Pipeline) startLane(ctx context.Context, l *lane) {
	p.laneWG.Add(1)
	go func() {
		defer p.laneWG.Done()
		if p.laneLoop(ctx, l) {
			p.queueMerge(l)
		}
	}()
}

// laneLoop processes the lane's chain depth-first until no message of it
// is left; false when ctx ended first (the lane stays on disk and the
// next controller resumes it). A message of the chain that cannot be
// taken now (it waits for a person, or is held back) keeps the lane open:
// the loop looks again every poll interval.
func (p *Pipeline) laneLoop(ctx context.Context, l *lane) bool {
	sch := p.d.Sched.Fork()
	mine := func(c string) bool { return c == l.chain }
	for ctx.Err() == nil {
		sel, err := sch.Next(sched.NextOptions{Chains: mine, Exclude: p.excluded})
		if err != nil {
			p.log.Error("select next message of lane", "lane", l.chain, "err", err)
			if sleepCtx(ctx, p.d.Poll) != nil {
				return false
			}
			continue
		}
		p.announceRejected(ctx, sel)
		if !sel.Found {
			if queued, err := p.d.Store.ChainsQueued(map[string]bool{l.chain: true}); err == nil && !queued {
				return true
			}
			if sleepCtx(ctx, p.d.Poll) != nil {
				return false
			}
			continue
		}
		cfg, err := p.d.Config()
		if err != nil {
			_ = sch.Finish(sel.Entry.ID)
			p.warn(ctx, sel.Entry.ID, fmt.Sprintf("cannot load .decree/config.yml, lane %s waits for a fix: %v", l.chain, err))
			if sleepCtx(ctx, p.d.Poll) != nil {
				return false
			}
			continue
		}
		l.setRunning(sel.Entry.ID, 0)
		p.process(ctx, cfg, sel.Entry)
		l.setRunning("", 0)
		if err := sch.Finish(sel.Entry.ID); err != nil {
			p.log.Error("finish message", "id", sel.Entry.ID, "err", err)
		}
	}
	return false
}

// resumeLanes picks up the lanes a previous controller left: a chain
// with messages queued runs on, a finished one is merged.
func (p *Pipeline) resumeLanes(ctx context.Context, ls []*lane) {
	for _, l := range ls {
		queued, err := p.d.Store.ChainsQueued(map[string]bool{l.chain: true})
		if err == nil && !queued || hasJournal(l) {
			p.queueMerge(l)
			continue
		}
		p.startLane(ctx, l)
	}
}

// loadLanesAtStart registers the lanes on disk before anything runs.
func (p *Pipeline) loadLanesAtStart() []*lane {
	p.adoptOrphanOutbox()
	ls, err := p.loadLanes()
	if err != nil {
		p.log.Error("parallel lanes not resumed", "err", err)
		p.warn(context.Background(), "", err.Error())
		return nil
	}
	p.mu.Lock()
	for _, l := range ls {
		p.lanes[l.chain] = l
	}
	p.mu.Unlock()
	return ls
}

// retryOfKey marks the first message of a chain that runs a conflicting
// chain's change again (merge.go).
const retryOfKey = "merge_retry_of"

// LaneStatus is one lane as status shows it.
type LaneStatus struct {
	Chain, Worker, MessageID, RetryOf string
	Attempt                           int
	Merging                           bool
	// MergePosition is the lane's place in the merge queue (1: merging
	// now), 0 while its chain runs.
	MergePosition int
	Opened        time.Time
}

// Lanes lists the open lanes, oldest first, and the merges applied so far.
func (p *Pipeline) Lanes() ([]LaneStatus, int64) {
	p.mu.Lock()
	ls := make([]*lane, 0, len(p.lanes))
	for _, l := range p.lanes {
		ls = append(ls, l)
	}
	var att = map[string]int{}
	for id, r := range p.running {
		att[id] = r.attempt
	}
	p.mu.Unlock()
	out := make([]LaneStatus, 0, len(ls))
	for _, l := range ls {
		l.mu.Lock()
		s := LaneStatus{Chain: l.chain, MessageID: l.msgID, Merging: l.merging, RetryOf: l.info.RetryOf, Opened: l.info.Opened}
		l.mu.Unlock()
		s.Attempt = att[s.MessageID]
		s.Worker = p.d.Leases.Reserved(l.chain)
		if s.Merging {
			s.MergePosition = p.merges.position(l)
		}
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Opened.Before(out[j].Opened) })
	return out, p.mergeOrder()
}

// ReplicaWorkers counts the connected replica workers (those a lane can use).
func (p *Pipeline) ReplicaWorkers() int {
	n := 0
	for _, w := range p.d.Leases.Workers() {
		if w.GetConnected() && !w.GetInPlace() {
			n++
		}
	}
	return n
}
