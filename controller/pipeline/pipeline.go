// Package pipeline is decree's one processing loop. `decreectl run`,
// `decreectl process` and a long-running controller all feed the same loop:
// it takes the next message from the inbox (depth-first within a chain,
// oldest chain otherwise), chooses its routine, checkpoints the tree, hands
// attempts to workers, retries by the rules, reverts and dead-letters on
// exhaustion, collects follow-ups, runs hooks, and records everything in the
// run directory and the event log.
//
// # Retry rules
//
// Attempts 1..N-1 leave the tree as the routine left it, so the next attempt
// sees the earlier work. Before attempt N (when N > 1) the tree is reverted
// to the message's checkpoint and failure-context.md summarises every
// earlier attempt. When attempt N fails too, the tree is reverted again and
// the message is dead-lettered. changes.diff always holds the change from
// the checkpoint to the tree after the latest attempt; changes.try-00K.diff
// keeps attempt K's.
//
// Follow-ups an attempt writes count only when the attempt succeeds; those
// of failed attempts are moved to the run directory (discarded-followups/).
//
// # Crash safety
//
// The loop (process.go, drive) asks the message's state machine
// (controller/msgstate, recorded in runs/<id>/state.json) what comes next
// and performs that step; every effect follows its recorded transition,
// and a refused step stops the message instead of going on. A controller
// restarted at any instant finds the message still in the inbox: an
// attempt it was running counts as failed ("controller restarted") once
// the old controller's leases are fenced, an attempt stopped by a shutdown
// is interrupted (the tree goes back to where it started and it runs
// again, interrupt.go), and a message whose end was recorded but not yet
// filed is filed (file.go). Reverting is computed afresh from the
// checkpoint and the current tree, so it can be repeated safely. Features
// around every attempt are stages (stage.go).
//
// # Hooks
//
// beforeAll runs when the loop picks a message after being idle, afterAll
// when the inbox runs empty; beforeEach and afterEach around every attempt;
// onDeadLetter once when a message is dead-lettered after exhausting its
// attempts (not when it never ran: invalid message, unknown routine, too
// deep, or a failing beforeEach). A failing beforeEach hook fails the attempt
// without running the routine; other failing hooks are reported as warnings.
package pipeline

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/decreehq/decree/controller/diskspace"
	"github.com/decreehq/decree/controller/events"
	"github.com/decreehq/decree/controller/lease"
	"github.com/decreehq/decree/controller/logbook"
	"github.com/decreehq/decree/controller/replica"
	"github.com/decreehq/decree/controller/sched"
	"github.com/decreehq/decree/controller/store"
	"github.com/decreehq/decree/pkg/checkpoint"
	"github.com/decreehq/decree/pkg/config"
	"github.com/decreehq/decree/pkg/message"
	"github.com/decreehq/decree/pkg/routine"
)

// Deps are the parts the loop drives.
type Deps struct {
	Store       *store.Store
	Sched       *sched.Scheduler
	Events      *events.Log
	Leases      *lease.Manager
	Checkpoints *checkpoint.Checkpointer
	// Replica serves replica workers; nil sends all work to in-place
	// workers (see replica.go).
	Replica *replica.Service
	// Logs holds attempt logs; the loop marks an attempt live before it
	// announces it, so followers never miss its start.
	Logs *logbook.Book
	// Config loads the project configuration; it is called before every
	// message so edits to config.yml apply to the next message.
	Config func() (*config.Config, error)
	Logger *slog.Logger
	// Poll is how often the idle loop looks at the inbox for files dropped
	// in by hand (default 1s). Submissions wake it at once.
	Poll time.Duration
	// Paused makes Run wait for the first Submit, ProcessMigrations or
	// Resume before it takes anything from the inbox. An embedded
	// controller uses it so that the command's own request (e.g. a process
	// job that reports on the queued messages) is in place before the
	// first message runs.
	Paused bool
	// FixedWorkers says the workers connected once the first one is are
	// all there will be. A routine whose driver or labels none of them
	// offers is then dead-lettered (NoCapableWorker) before its first
	// attempt. Otherwise such an attempt waits for a capable worker to
	// connect, with a warning event saying what it waits for.
	FixedWorkers bool
	// OwnChainsOnly makes the loop take only messages of chains submitted
	// to it (Submit, Own) until a process job asks for everything; other
	// queued messages are left alone (see scope.go).
	OwnChainsOnly bool
	// Disk watches the free space of the project's file system; while it
	// is full the loop takes nothing from the inbox (see disk.go). Nil
	// watches nothing.
	Disk *diskspace.Monitor
}

// Pipeline is the processing loop of one project.
type Pipeline struct {
	d    Deps
	log  *slog.Logger
	wake chan struct{}

	gate   chan struct{} // closed when the loop may start
	resume sync.Once

	// work is held while a message is processed: by the loop, and by a
	// client's cancel of a message that ran partly (cancel.go).
	work sync.Mutex
	// stages act around every attempt (stage.go).
	stages []attemptStage

	mu   sync.Mutex
	held []*events.Event // end-of-work events waiting for afterAll
	// running are the messages being processed: one, or one per lane
	// (lanes.go).
	running map[string]*running
	limit   *usageWait // a usage-limit wait in progress (stage_usagelimit.go)
	jobs    map[string]*job
	// notReady are messages held back by a failed pre-check (stage_precheck.go).
	notReady map[string]notReady
	// w are the messages waiting for a person (wait.go).
	w waits

	runSeq int
	// lanes are the parallel chains with a tree of their own, by chain
	// (lane.go); laneWG counts their goroutines and the merge queue's.
	lanes  map[string]*lane
	laneWG sync.WaitGroup
	merges mergeQueue
	// collectMu serialises taking work back from lanes' workers: the
	// treeMu is held while the project tree is merged into or read as a
	// lane's base, so that no lane starts from a half-applied merge.
	treeMu sync.Mutex
	// inbox snapshot, the follow-ups a worker returned and their
	// collection (lane_tree.go).
	collectMu   sync.Mutex
	scope       scope
	stopping    bool
	interrupted []Interruption

	unpruned atomic.Int32 // runs finished since the object store was pruned
}

// New returns a loop; call Run to start it.
func New(d Deps) *Pipeline {
	if d.Logger == nil {
		d.Logger = slog.New(slog.DiscardHandler)
	}
	if d.Poll <= 0 {
		d.Poll = time.Second
	}
	p := &Pipeline{d: d, log: d.Logger, wake: make(chan struct{}, 1), gate: make(chan struct{}), jobs: map[string]*job{}, running: map[string]*running{}, lanes: map[string]*lane{}}
	p.stages = []attemptStage{p.newPreCheckStage(), &askStage{now: time.Now}, p.newUsageLimitStage(), p.newUsageStage()}
	if !d.Paused {
		p.Resume()
	}
	return p
}

// Resume lets a loop created with Deps.Paused start processing.
func (p *Pipeline) Resume() {
	p.resume.Do(func() { close(p.gate) })
}

// Wake makes an idle loop look at the inbox now.
func (p *Pipeline) Wake() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// Run processes messages until ctx ends.
func (p *Pipeline) Run(ctx context.Context) error {
	select {
	case <-p.gate:
	case <-ctx.Done():
		return nil
	}
	ls := p.loadLanesAtStart()
	p.settleFiled(ctx)
	p.loadWaits()
	p.laneWG.Add(1)
	go func() {
		defer p.laneWG.Done()
		p.mergeLoop(ctx)
	}()
	defer p.laneWG.Wait()
	p.resumeLanes(ctx, ls)
	busy := false
	for {
		if ctx.Err() != nil {
			return nil
		}
		cfg, err := p.d.Config()
		if err != nil {
			p.warn(ctx, "", fmt.Sprintf("cannot load .decree/config.yml, waiting for a fix: %v", err))
			if !p.idle(ctx) {
				return nil
			}
			continue
		}
		if p.diskFull(ctx) {
			if !p.idle(ctx) {
				return nil
			}
			continue
		}
		if p.parallelOn(cfg) || len(p.laneChains()) > 0 {
			if !p.parallelTurn(ctx, cfg, &busy) {
				return nil
			}
			continue
		}
		sel, err := p.d.Sched.Next(sched.NextOptions{Chains: p.chainFilter(), Exclude: p.excluded})
		if err != nil {
			p.log.Error("select next message", "err", err)
			if !p.idle(ctx) {
				return nil
			}
			continue
		}
		for _, r := range sel.Rejected {
			p.emit(ctx, &events.Event{Kind: events.MessageDead, MessageID: r.ID, Chain: r.Chain,
				JobID: p.rejectedInJob(r.Chain, r.File), Text: fmt.Sprintf("%s: %s", r.Note.Reason, firstLine(r.Note.Detail))})
			p.chainMaybeFinished(ctx, r.Chain)
		}
		if !sel.Found {
			if busy {
				busy = false
				p.runBatchHook(ctx, cfg, "afterAll")
			}
			p.pruneIdle(ctx)
			p.advanceJobs(ctx)
			p.flushHeld(ctx)
			if !p.idle(ctx) {
				return nil
			}
			continue
		}
		p.flushHeld(ctx)
		if !busy {
			busy = true
			p.runBatchHook(ctx, cfg, "beforeAll")
		}
		p.work.Lock()
		p.process(ctx, cfg, sel.Entry)
		p.work.Unlock()
		if err := p.d.Sched.Finish(sel.Entry.ID); err != nil {
			p.log.Error("finish message", "id", sel.Entry.ID, "err", err)
		}
		p.chainMaybeFinished(ctx, sel.Entry.Chain)
		p.pruneBusy(ctx)
		p.advanceJobs(ctx)
	}
}

// idle waits for a wake-up or the poll interval; false when ctx ended.
func (p *Pipeline) idle(ctx context.Context) bool {
	t := time.NewTimer(p.d.Poll)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-p.wake:
	case <-t.C:
	}
	return true
}

// chainMaybeFinished announces CHAIN_FINISHED when no message of chain is
// left in the inbox. The event is held until the loop either takes the next
// message or, with the inbox empty, has run afterAll: a client that waits
// for the end of its chain then also sees the batch's afterAll hook done.
func (p *Pipeline) chainMaybeFinished(ctx context.Context, chain string) {
	if chain == "" || p.laneOf(chain) != nil {
		return // a parallel chain finishes when its merge is done (merge.go)
	}
	if queued, err := p.d.Store.ChainsQueued(map[string]bool{chain: true}); err != nil || queued {
		if err != nil {
			p.log.Error("list inbox", "err", err)
		}
		return
	}
	p.hold(&events.Event{Kind: events.ChainFinished, Chain: chain})
}

// hold queues an end-of-work event for flushHeld.
func (p *Pipeline) hold(ev *events.Event) {
	if ev.Time.IsZero() {
		ev.Time = time.Now()
	}
	p.mu.Lock()
	p.held = append(p.held, ev)
	p.mu.Unlock()
}

// flushHeld emits the held end-of-work events in order.
func (p *Pipeline) flushHeld(ctx context.Context) {
	p.mu.Lock()
	held := p.held
	p.held = nil
	p.mu.Unlock()
	for _, ev := range held {
		p.emit(ctx, ev)
	}
}

// emit appends an event to the log.
func (p *Pipeline) emit(_ context.Context, ev *events.Event) *events.Event {
	if ev.Time.IsZero() {
		ev.Time = time.Now()
	}
	if ev.Lane == "" && ev.Chain != "" && p.laneOf(ev.Chain) != nil {
		ev.Lane = ev.Chain // every event of a message in a lane names it
	}
	if ev.JobID == "" && ev.Chain != "" {
		p.mu.Lock()
		for _, j := range p.jobs {
			if j.owns(ev.Chain) {
				ev.JobID = j.id
				if ev.Kind == events.MessageDead && j.drain[ev.Chain] {
					j.drainDead++
				}
			}
		}
		p.mu.Unlock()
	}
	if p.d.Events == nil {
		return ev // no event log (tests of single steps)
	}
	out, err := p.d.Events.Append(ev)
	if err != nil {
		p.log.Error("append event", "kind", ev.Kind, "err", err)
		return ev
	}
	return out
}

func (p *Pipeline) warn(ctx context.Context, id, text string) {
	p.log.Warn(text, "message", id)
	// The chain lets `decreectl run`, which follows its own chain, show it.
	chain, _, _ := message.SplitID(id)
	p.emit(ctx, &events.Event{Kind: events.Warning, MessageID: id, Chain: chain, Text: text})
}

// Running returns the message in progress, if any: with lanes open, the
// one that started first (Lanes lists all of them).
func (p *Pipeline) Running() (id, routineName string, attempt int, ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	r := p.firstRunningLocked()
	if r == nil {
		return "", "", 0, false
	}
	return r.id, r.routine, r.attempt, true
}

// RunningIDs lists every message being processed now (one per lane).
func (p *Pipeline) RunningIDs() map[string]bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[string]bool, len(p.running))
	for id := range p.running {
		out[id] = true
	}
	return out
}

// firstRunningLocked is the running message that started first.
func (p *Pipeline) firstRunningLocked() *running {
	var first *running
	for _, r := range p.running {
		if first == nil || r.seq < first.seq {
			first = r
		}
	}
	return first
}

// dispatch hands work to a worker and waits for its result.
func (p *Pipeline) dispatch(ctx context.Context, a *lease.Work, need lease.Requirements) (lease.Result, error) {
	return p.d.Leases.Dispatch(ctx, a, need)
}

// library returns the routine library for cfg.
func (p *Pipeline) library(cfg *config.Config) routine.Library {
	return routine.ProjectLibrary(p.d.Store.Root(), cfg)
}

// ErrNotFound is returned (wrapped) for unknown messages and runs.
var ErrNotFound = errors.New("not found")

// ErrConflict is returned (wrapped) when the project state forbids an
// operation; *ConflictError carries the paths.
var ErrConflict = errors.New("conflict")
