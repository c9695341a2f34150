package pipeline

import (
	"context"
	"errors"
	"fmt"
	"path"
	"reflect"
	"strings"

	"github.com/decreehq/decree/controller/events"
	"github.com/decreehq/decree/controller/msgstate"
	"github.com/decreehq/decree/controller/store"
	"github.com/decreehq/decree/pkg/checkpoint"
	"github.com/decreehq/decree/pkg/config"
	"github.com/decreehq/decree/pkg/layout"
)

// errStopped ends a message's processing because the loop is shutting
// down: the message stays queued, its state recorded, and the next
// controller goes on from there.
var errStopped = errors.New("the controller is stopping")

// process handles one message from selection to done or dead. Once the
// message has a run directory, its state machine (package msgstate,
// recorded in state.json) is the only thing that says what comes next,
// also after a restart: drive asks msgstate.Next and performs that step.
func (p *Pipeline) process(ctx context.Context, cfg *config.Config, e store.Entry) {
	// The message counts as running from its selection on, so that a
	// CancelMessage arriving before its first attempt reaches it here
	// instead of dead-lettering the inbox file under the loop's feet.
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	r := &running{id: e.ID, cancel: cancel}
	p.setRunning(r)
	defer p.clearRunning(r)
	if e.Message.GetString("to") != "" {
		p.replyFromInbox(ctx, e) // a reply, not work (wait.go)
		return
	}
	rt, reject := p.chooseRoutine(ctx, cfg, e)
	if ctx.Err() != nil {
		return // shutting down: the message stays queued, untouched
	}
	if reason, ok := r.cancelled(); ok {
		p.deadLetterUnrun(ctx, e, store.DeadNote{Reason: string(msgstate.Cancelled), MessageID: e.ID, Detail: reason})
		return
	}
	if reject != nil {
		p.deadLetterUnrun(ctx, e, *reject)
		return
	}
	e.Message.Set("routine", rt.Name)
	ln := p.laneOf(e.Chain)
	laneID := ""
	if ln != nil {
		laneID = ln.chain
	}
	run, err := p.d.Store.StartRun(store.RunStart{Entry: e, Routine: rt.Name, Trigger: trigger(e), Migration: migrationOf(cfg, e), MaxAttempts: cfg.AttemptsFor(rt.Name), Lane: laneID})
	if err != nil {
		if ctx.Err() != nil {
			return
		}
		if p.noSpace(ctx, err) {
			return // stays queued; the loop waits for space
		}
		p.deadLetterUnrun(ctx, e, store.DeadNote{Reason: string(msgstate.RunDirectoryFailed), MessageID: e.ID, Detail: err.Error()})
		return
	}
	p.saveRouterUsage(r, run)
	m := &msg{e: e, cfg: cfg, rt: rt, run: run, max: cfg.AttemptsFor(rt.Name), lane: p.runLane(run)}
	if s := run.State(); s.MaxAttempts > 0 {
		m.max = s.MaxAttempts
	}
	// A cancel request that came before the run existed is recorded now.
	if reason, ok := r.attach(run); ok {
		if err := p.record(m, func(v msgstate.Msg) (msgstate.Msg, error) { return msgstate.RequestCancel(v, reason) }); err != nil {
			p.halt(ctx, m, err)
			return
		}
	}
	p.mu.Lock()
	r.routine = rt.Name
	p.mu.Unlock()
	p.emit(ctx, &events.Event{Kind: events.MessageStarted, MessageID: e.ID, Chain: e.Chain, Routine: rt.Name, Lane: laneID})
	p.drive(ctx, runCtx, m)
}

// drive takes m through its state machine until it is filed (done or
// dead), the loop stops (the message stays queued), or a step is refused
// or cannot be recorded (halt). Every step must move the machine: a step
// that leaves it as it was is a bug, and halts the message rather than
// spinning.
func (p *Pipeline) drive(ctx, runCtx context.Context, m *msg) {
	for {
		v := m.run.Machine()
		step := msgstate.Next(v)
		err := p.perform(ctx, runCtx, m, v, step)
		switch {
		case errors.Is(err, errStopped), errors.Is(err, errWaiting):
			return
		case p.holdNotReady(ctx, m, err):
			return
		case err != nil:
			p.halt(ctx, m, err)
			return
		}
		after := m.run.Machine()
		if after.Final() && m.filed {
			return
		}
		if reflect.DeepEqual(after, v) {
			p.halt(ctx, m, fmt.Errorf("step %s made no progress from state %s", step, v.State))
			return
		}
	}
}

// perform carries out one planned step.
func (p *Pipeline) perform(ctx, runCtx context.Context, m *msg, v msgstate.Msg, step msgstate.Step) error {
	switch step {
	case msgstate.StepClaim:
		// Recorded with the checkpoint step that follows: the claim has
		// no effect of its own.
		_, err := m.run.Stage(func(v msgstate.Msg) (msgstate.Msg, error) { return msgstate.Claim(v, m.max) })
		return err
	case msgstate.StepCheckpoint:
		return p.takeCheckpoint(ctx, runCtx, m)
	case msgstate.StepCancel:
		return p.cancelStep(ctx, m, v)
	case msgstate.StepWait:
		return p.park(ctx, m, true)
	}
	if m.manifest == nil {
		man, err := p.readCheckpoint(m)
		if err != nil {
			return err
		}
		m.manifest = man
	}
	switch step {
	case msgstate.StepAttempt:
		return p.runAttempt(ctx, runCtx, m, v.Attempt+1)
	case msgstate.StepRevertLast:
		// Before the last attempt the tree goes back to the checkpoint,
		// with a summary of the earlier attempts; a replay after a crash
		// reverts again (Restore is idempotent).
		if err := p.record(m, func(v msgstate.Msg) (msgstate.Msg, error) { return msgstate.Revert(v, msgstate.BeforeLastAttempt) }); err != nil {
			return err
		}
		if err := p.revert(runCtx, m.run, m.manifest); err != nil {
			return p.afterRevertError(ctx, m, err)
		}
		if err := p.writeFailureContext(m.run); err != nil {
			p.log.Error("failure context", "message", m.e.ID, "err", err)
		}
		return p.runAttempt(ctx, runCtx, m, v.Attempt+1)
	case msgstate.StepLost:
		return p.finishLost(ctx, m, v)
	case msgstate.StepResume:
		return p.rerun(ctx, runCtx, m, v)
	case msgstate.StepReject:
		return p.reject(ctx, m)
	case msgstate.StepCollect:
		defer p.laneCollecting(m)()
		moveHeldOutbox(m.run, layout.Path(p.d.Store.Root(), layout.Outbox))
		if v.State == msgstate.Waiting { // approved: its follow-ups come back first (wait.go)
			return p.collectApproved(ctx, m)
		}
		before, ok := m.run.InboxSnapshot()
		if !ok {
			// Not recorded (cannot happen: it is written before the
			// attempt starts): take only the outbox, leave the inbox.
			before, _ = p.d.Store.SnapshotInbox()
		}
		return p.collect(ctx, m, before)
	case msgstate.StepComplete:
		return p.complete(ctx, m)
	case msgstate.StepExhausted, msgstate.StepRevert:
		return p.exhausted(ctx, m)
	case msgstate.StepBudget:
		return p.overBudget(ctx, m)
	case msgstate.StepNone:
		// Recorded as final, but not filed yet (the controller stopped
		// between the record and the move, or before run.json).
		return p.file(ctx, m)
	}
	return fmt.Errorf("no step %q for state %s", step, v.State)
}

// runAttempt runs attempt n: the stages before it (a usage-limit wait),
// then the attempt. A shutdown during either stops the message: an
// attempt under way is recorded as interrupted and its tree put back.
func (p *Pipeline) runAttempt(ctx, runCtx context.Context, m *msg, n int) error {
	if err := p.beforeAttempt(runCtx, m, n); err != nil {
		if ctx.Err() != nil {
			return errStopped
		}
		if runCtx.Err() != nil {
			return nil // a cancel request was recorded: Next plans it
		}
		return err
	}
	err := p.attempt(runCtx, m, n)
	switch {
	case err == nil:
		return nil
	case ctx.Err() != nil:
		p.interrupt(m)
		return errStopped
	case runCtx.Err() != nil && m.run.Machine().Cancel != "":
		return nil
	}
	return err
}

// record applies a transition and writes it to state.json before the
// caller performs its effect. A refused transition, or one that cannot be
// written, is returned: the caller stops (see halt).
func (p *Pipeline) record(m *msg, tr func(msgstate.Msg) (msgstate.Msg, error)) error {
	if _, err := m.run.Step(tr); err != nil {
		return fmt.Errorf("record a step of %s: %w", m.run.ID(), err)
	}
	return nil
}

// halt stops processing m after a refused or unrecordable step: the
// message stays in the inbox as it is, the loop leaves it alone until the
// controller restarts, and the error names the state and the transitions
// that led there.
func (p *Pipeline) halt(ctx context.Context, m *msg, err error) {
	st := m.run.State()
	hist := strings.Join(st.History, "; ")
	if hist == "" {
		hist = "(none recorded)"
	}
	text := fmt.Sprintf("message %s stopped in state %s: %v. Its history: %s. It stays in the inbox, untouched until `decreectl process` or a restart tries it again; inspect .decree/runs/%s/state.json.",
		m.e.ID, st.Machine.State, err, hist, m.e.ID)
	p.log.Error(text)
	p.holdBack(m, errors.New(text))
	p.warn(ctx, m.e.ID, text)
}

// takeCheckpoint takes the message's checkpoint (manifest.json).
func (p *Pipeline) takeCheckpoint(ctx, runCtx context.Context, m *msg) error {
	man, err := p.checkpoint(runCtx, m)
	switch {
	case err == nil:
		m.manifest = man
		return nil
	case ctx.Err() != nil:
		return errStopped // shutting down is no failure of the message: it stays queued
	case runCtx.Err() != nil && m.run.Machine().Cancel != "":
		return nil // Next plans the cancellation
	}
	p.log.Error("checkpoint", "message", m.e.ID, "err", err)
	if err := p.record(m, func(v msgstate.Msg) (msgstate.Msg, error) { return msgstate.Kill(v, msgstate.CheckpointFailed) }); err != nil {
		return err
	}
	m.note = &store.DeadNote{Reason: string(msgstate.CheckpointFailed), MessageID: m.e.ID,
		Detail: fmt.Sprintf("Taking the checkpoint before the first attempt failed: %v", err)}
	return p.file(ctx, m)
}

// checkpoint takes the tree's manifest and writes manifest.json.
func (p *Pipeline) checkpoint(ctx context.Context, m *msg) (*checkpoint.Manifest, error) {
	var man *checkpoint.Manifest
	var err error
	if m.lane != nil {
		man = m.lane.current() // the lane's tree (lane_tree.go)
	} else if man, err = p.d.Checkpoints.Snapshot(ctx, p.d.Store.Root()); err != nil {
		return nil, err
	}
	data, err := checkpoint.MarshalManifest(man)
	if err != nil {
		return nil, err
	}
	// Durable with the Commit before the first attempt starts, and so is
	// the step: it is written with the attempt's start (a crash before
	// that finds the message claimed and takes the checkpoint again).
	if err := m.run.WriteFile(layout.ManifestFile, data); err != nil {
		return nil, fmt.Errorf("write manifest: %w", err)
	}
	if _, err := m.run.Stage(msgstate.Checkpoint); err != nil {
		return nil, err
	}
	return man, nil
}

// readCheckpoint reads the manifest.json of a message that has one.
func (p *Pipeline) readCheckpoint(m *msg) (*checkpoint.Manifest, error) {
	mpath, err := m.run.Path(layout.ManifestFile)
	if err != nil {
		return nil, err
	}
	man, err := checkpoint.ReadManifest(mpath)
	if err != nil {
		return nil, fmt.Errorf("read the checkpoint of %s: %w", m.e.ID, err)
	}
	return man, nil
}

// writeDiff records the change from the checkpoint to the current tree as
// changes.diff and as attempt n's own diff, and returns the tree it read.
// The diff streams to the attempt's file (memory stays bounded whatever the
// size of the files), changes.diff is a hard link to it, not a copy, and
// so is the attempt's file when an earlier attempt's diff is the same.
func (p *Pipeline) writeDiff(ctx context.Context, run *store.Run, manifest *checkpoint.Manifest, n int) (*checkpoint.Manifest, error) {
	var earlier []string
	for k := n - 1; k >= 1; k-- {
		earlier = append(earlier, layout.AttemptDiffName(k))
	}
	return p.writeDiffFiles(ctx, run, manifest, layout.AttemptDiffName(n), earlier, layout.DiffFile)
}

// revert brings the tree back to manifest: Checkpointer.Restore puts back
// every differing path from the object store (streamed), verifies them,
// and can simply be repeated after a crash.
func (p *Pipeline) revert(ctx context.Context, run *store.Run, manifest *checkpoint.Manifest) error {
	if l := p.runLane(run); l != nil {
		return p.revertLane(ctx, l, run, manifest)
	}
	// What led to the revert is made durable before the tree changes.
	if err := run.Commit(); err != nil {
		return err
	}
	paths, err := p.d.Checkpoints.Restore(ctx, p.d.Store.Root(), manifest)
	if err != nil {
		return fmt.Errorf("revert %s: %w", run.ID(), err)
	}
	if len(paths) == 0 {
		return nil
	}
	p.emit(ctx, &events.Event{Kind: events.Reverted, MessageID: run.ID(), Text: fmt.Sprintf("%d path(s) put back", len(paths))})
	return nil
}

// afterRevertError handles a revert that failed: cut short by a shutdown
// (the next controller reverts again), by a cancel request (Next plans
// it), or a real failure, which dead-letters the message (RevertFailed):
// the tree no longer matches its checkpoint, which needs a person.
func (p *Pipeline) afterRevertError(ctx context.Context, m *msg, err error) error {
	if ctx.Err() != nil {
		p.log.Info("revert interrupted by shutdown", "message", m.e.ID)
		return errStopped
	}
	if m.run.Machine().Cancel != "" && errors.Is(err, context.Canceled) {
		return nil
	}
	p.log.Error("revert failed", "message", m.e.ID, "err", err)
	if rerr := p.record(m, func(v msgstate.Msg) (msgstate.Msg, error) { return msgstate.Kill(v, msgstate.RevertFailed) }); rerr != nil {
		return rerr
	}
	m.note = &store.DeadNote{Reason: string(msgstate.RevertFailed), MessageID: m.e.ID,
		Detail: fmt.Sprintf("Reverting to the checkpoint failed, so the working tree may not match .decree/runs/%s/manifest.json: %v\nInspect the tree (changes.diff shows the last known change), fix it, then requeue.", m.e.ID, err)}
	return p.file(ctx, m)
}

// trigger is run.json's trigger: "inbox" for a root message, "chain" for a
// follow-up, "cron:<stem>" when the message says so.
func trigger(e store.Entry) string {
	if t := e.Message.GetString("trigger"); strings.HasPrefix(t, "cron:") {
		return t
	}
	if e.Seq > 0 {
		return "chain"
	}
	return "inbox"
}

// migrationOf names the migration a spec message comes from, when its
// input_file lies in the migrations directory.
func migrationOf(cfg *config.Config, e store.Entry) string {
	in := e.Message.InputFile()
	if e.Message.Type() != "spec" || in == "" {
		return ""
	}
	if path.Dir(path.Clean(in)) == path.Clean(cfg.MigrationsDir) {
		return path.Base(in)
	}
	return ""
}

// specName is how processed.md records a spec: its file name for a
// migration, else its path.
func specName(cfg *config.Config, input string) string {
	if path.Dir(path.Clean(input)) == path.Clean(cfg.MigrationsDir) {
		return path.Base(input)
	}
	return path.Clean(input)
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(strings.TrimSpace(s), "\n")
	return line
}

func (p *Pipeline) setRunning(r *running) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.runSeq++
	r.seq = p.runSeq
	p.running[r.id] = r
}

func (p *Pipeline) clearRunning(r *running) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.running[r.id] == r {
		delete(p.running, r.id)
	}
}
