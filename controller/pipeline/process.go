package pipeline

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/decreehq/decree/controller/events"
	"github.com/decreehq/decree/controller/msgstate"
	"github.com/decreehq/decree/controller/store"
	"github.com/decreehq/decree/pkg/checkpoint"
	"github.com/decreehq/decree/pkg/config"
	"github.com/decreehq/decree/pkg/layout"
	"github.com/decreehq/decree/pkg/routine"
)

// Run-state phases (state.json "phase") the loop resumes from.
const (
	phaseSucceeded = "succeeded"
	phaseExhausted = "exhausted"
)

// process handles one message from selection to done or dead. Once the
// message has a run directory, its state machine (package msgstate,
// recorded in state.json) says what comes next, also after a restart.
func (p *Pipeline) process(ctx context.Context, cfg *config.Config, e store.Entry) {
	log := p.log.With("message", e.ID)
	// The message counts as running from its selection on, so that a
	// CancelMessage arriving before its first attempt reaches it here
	// instead of dead-lettering the inbox file under the loop's feet.
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	p.setRunning(&running{id: e.ID, cancel: cancel})
	defer p.setRunning(nil)
	rt, reject := p.chooseRoutine(ctx, cfg, e)
	if ctx.Err() != nil {
		return // shutting down: the message stays queued, untouched
	}
	if reason, ok := p.cancelled(e.ID); ok {
		p.deadLetterUnrun(ctx, e, store.DeadNote{Reason: string(msgstate.Cancelled), MessageID: e.ID, Detail: reason})
		return
	}
	if reject != nil {
		p.deadLetterUnrun(ctx, e, *reject)
		return
	}
	p.mu.Lock()
	p.running.routine = rt.Name
	p.mu.Unlock()
	e.Message.Set("routine", rt.Name)
	run, err := p.d.Store.StartRun(store.RunStart{Entry: e, Routine: rt.Name, Trigger: trigger(e), Migration: migrationOf(cfg, e), MaxAttempts: cfg.AttemptsFor(rt.Name)})
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
	m := &msg{e: e, cfg: cfg, rt: rt, run: run, max: cfg.AttemptsFor(rt.Name)}
	if s := run.State(); s.MaxAttempts > 0 {
		m.max = s.MaxAttempts
	}
	// Recorded with the checkpoint step that follows: the claim has no
	// effect of its own.
	if _, err := run.Stage(func(v msgstate.Msg) (msgstate.Msg, error) { return msgstate.Claim(v, m.max) }); err != nil {
		log.Error("message state machine", "err", err)
	}

	p.emit(ctx, &events.Event{Kind: events.MessageStarted, MessageID: e.ID, Chain: e.Chain, Routine: rt.Name})
	m.manifest, err = p.checkpoint(runCtx, m)
	if err != nil {
		if ctx.Err() != nil {
			return // shutting down is no failure of the message: it stays queued
		}
		if reason, ok := p.cancelled(e.ID); ok {
			p.step(m, func(v msgstate.Msg) (msgstate.Msg, error) { return msgstate.Kill(v, msgstate.Cancelled) })
			p.deadLetterUnrun(ctx, e, store.DeadNote{Reason: string(msgstate.Cancelled), MessageID: e.ID, Detail: reason})
			p.finishRun(ctx, run, store.OutcomeCancelled)
			return
		}
		log.Error("checkpoint", "err", err)
		p.step(m, func(v msgstate.Msg) (msgstate.Msg, error) { return msgstate.Kill(v, msgstate.CheckpointFailed) })
		p.deadLetterUnrun(ctx, e, store.DeadNote{Reason: string(msgstate.CheckpointFailed), MessageID: e.ID,
			Detail: fmt.Sprintf("Taking the checkpoint before the first attempt failed: %v", err)})
		p.finishRun(ctx, run, store.OutcomeDeadLettered)
		return
	}

	lastBlockedByHook := false
	for range 4*m.max + 64 {
		v := run.Machine()
		switch msgstate.Next(v) {
		case msgstate.StepLost, msgstate.StepResume:
			p.finishLost(runCtx, m, v)
			continue
		case msgstate.StepCollect:
			before, ok := run.InboxSnapshot()
			if !ok {
				// Not recorded (cannot happen: it is written before the
				// attempt starts): take only the outbox, leave the inbox.
				before, _ = p.d.Store.SnapshotInbox()
			}
			p.collect(ctx, m, before)
			continue
		case msgstate.StepComplete:
			p.complete(ctx, m)
			return
		case msgstate.StepExhausted:
			p.exhausted(ctx, m, !lastBlockedByHook)
			return
		case msgstate.StepRevert:
			if v.Why == msgstate.ForCancel {
				p.cancelMessage(ctx, m, "cancelled by a client")
			} else {
				p.exhausted(ctx, m, !lastBlockedByHook)
			}
			return
		case msgstate.StepNone:
			// Recorded as final, but the file was still in the inbox
			// (the controller stopped between the record and the move).
			if v.State == msgstate.Done {
				p.complete(ctx, m)
				return
			}
			p.deadLetter(ctx, e, store.DeadNote{Reason: string(v.Reason), MessageID: e.ID,
				Detail: fmt.Sprintf("The message was dead-lettered (%s) before the controller stopped; see .decree/runs/%s/.", v.Reason, e.ID)})
			p.finishRun(ctx, run, store.OutcomeDeadLettered)
			return
		case msgstate.StepAttempt, msgstate.StepRevertLast:
		default:
			log.Error("unexpected state of a message being processed", "state", v.State, "attempt", v.Attempt)
			return
		}
		n := v.Attempt + 1
		if err := p.pauseForUsageLimit(runCtx, e, run, n); err != nil {
			if reason, ok := p.cancelled(e.ID); ok && ctx.Err() == nil {
				p.cancelMessage(ctx, m, reason)
			}
			return // stopping: the message stays queued and waits again after a restart
		}
		if msgstate.Next(v) == msgstate.StepRevertLast {
			// Before the last attempt the tree goes back to the
			// checkpoint, with a summary of the earlier attempts.
			p.step(m, func(v msgstate.Msg) (msgstate.Msg, error) { return msgstate.Revert(v, msgstate.BeforeLastAttempt) })
			if err := p.revert(runCtx, run, m.manifest); err != nil {
				if reason, ok := p.cancelled(e.ID); ok {
					p.cancelMessage(ctx, m, reason)
					return
				}
				p.haltMessage(ctx, m, err)
				return
			}
			if err := p.writeFailureContext(run); err != nil {
				log.Error("failure context", "err", err)
			}
		}
		res, err := p.attempt(runCtx, m, n)
		if err != nil {
			if ctx.Err() != nil {
				// Shutting down: the attempt is recorded as interrupted,
				// the message stays queued, the next attempt follows
				// when a controller processes it again.
				p.interrupt(m)
				return
			}
			if reason, ok := p.cancelled(e.ID); ok {
				p.cancelMessage(ctx, m, reason)
				return
			}
			log.Error("attempt", "attempt", n, "err", err)
		}
		lastBlockedByHook = res.blockedByHook
		if !res.ok && !res.blockedByHook {
			if budget, limited := p.usageLimited(runCtx, cfg, e, run, m.manifest, n); limited {
				m.max = budget // the limited attempt does not count
				p.step(m, func(v msgstate.Msg) (msgstate.Msg, error) { return msgstate.Extend(v, budget) })
			}
		}
	}
	log.Error("the message made no progress; leaving it queued", "state", run.Machine().State)
}

// checkpoint returns the message's manifest, taking it on first use.
func (p *Pipeline) checkpoint(ctx context.Context, m *msg) (*checkpoint.Manifest, error) {
	run := m.run
	mpath, err := run.Path(layout.ManifestFile)
	if err != nil {
		return nil, err
	}
	// Once checkpointed, the manifest on disk is the checkpoint. Before
	// that the tree is still as it was, so a manifest written by an
	// interrupted earlier start is simply taken again.
	if st := run.State(); st.Phase != "" || len(st.Attempts) > 0 || (st.Machine.State != msgstate.Claimed && st.Machine.State != msgstate.Queued && st.Machine.State != "") {
		return checkpoint.ReadManifest(mpath)
	}
	man, ok := p.recentTree()
	if !ok {
		var err error
		if man, err = p.d.Checkpoints.Snapshot(ctx, p.d.Store.Root()); err != nil {
			return nil, err
		}
	}
	data, err := checkpoint.MarshalManifest(man)
	if err != nil {
		return nil, err
	}
	// Durable with the Commit before the first attempt starts, and so is
	// the step: it is written with the attempt's start (a crash before
	// that finds the message claimed and takes the checkpoint again).
	if err := run.WriteFile(layout.ManifestFile, data); err != nil {
		return nil, fmt.Errorf("write manifest: %w", err)
	}
	p.stage(m, msgstate.Checkpoint)
	return man, nil
}

// runSucceeded reports whether a run's last attempt succeeded (older state
// files said so with the phase instead).
func runSucceeded(st store.RunState) bool {
	if st.Phase == phaseSucceeded {
		return true
	}
	n := len(st.Attempts)
	return n > 0 && st.Attempts[n-1].Status == store.AttemptSucceeded
}

// writeDiff records the change from the checkpoint to the current tree as
// changes.diff and as attempt n's own diff.
// The diff streams to the attempt's file (memory stays bounded whatever the
// size of the files), changes.diff is a hard link to it, not a copy, and
// so is the attempt's file when an earlier attempt's diff is the same.
func (p *Pipeline) writeDiff(ctx context.Context, run *store.Run, manifest *checkpoint.Manifest, n int) error {
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
	p.forgetTree()
	// What led to the revert is made durable before the tree changes.
	if err := run.Commit(); err != nil {
		return err
	}
	paths, err := p.d.Checkpoints.Restore(ctx, p.d.Store.Root(), manifest)
	if err != nil {
		return fmt.Errorf("revert %s to its checkpoint: %w", run.ID(), err)
	}
	if len(paths) == 0 {
		return nil
	}
	p.emit(ctx, &events.Event{Kind: events.Reverted, MessageID: run.ID(), Text: "to the checkpoint taken before the first attempt"})
	return nil
}

// complete files a successful message: follow-ups, done/, processed.md,
// run.json.
func (p *Pipeline) complete(ctx context.Context, m *msg) {
	cfg, e, run := m.cfg, m.e, m.run
	p.step(m, msgstate.Complete)
	st := p.d.Store
	if _, err := os.Stat(filepath.Join(st.Dir(), layout.Inbox, e.File)); err == nil {
		if _, err := st.MarkDone(e.File); err != nil {
			p.log.Error("move to done", "message", e.ID, "err", err)
		}
	}
	if e.Message.Type() == "spec" {
		if err := st.MarkProcessed(specName(cfg, e.Message.InputFile())); err != nil {
			p.log.Error("mark processed", "message", e.ID, "err", err)
		}
	}
	p.finishRun(ctx, run, store.OutcomeSucceeded)
	p.emit(ctx, &events.Event{Kind: events.MessageDone, MessageID: e.ID, Chain: e.Chain, Routine: run.State().Routine})
}

// exhausted reverts and dead-letters a message whose attempts all failed.
func (p *Pipeline) exhausted(ctx context.Context, m *msg, fireHook bool) {
	cfg, e, run := m.cfg, m.e, m.run
	p.step(m, func(v msgstate.Msg) (msgstate.Msg, error) { return msgstate.Revert(v, msgstate.AfterExhausted) })
	_ = run.Update(func(s *store.RunState) error { s.Phase = phaseExhausted; return nil })
	if err := p.revert(ctx, run, m.manifest); err != nil {
		p.haltMessage(ctx, m, err)
		return
	}
	p.step(m, func(v msgstate.Msg) (msgstate.Msg, error) { return msgstate.Kill(v, msgstate.RetriesExhausted) })
	s := run.State()
	detail := fmt.Sprintf("All %d attempt(s) of routine %s failed; the tree was reverted to the checkpoint. Logs and diffs of every attempt are in .decree/runs/%s/.\n\n%s",
		len(s.Attempts), s.Routine, e.ID, attemptSummary(s))
	p.deadLetter(ctx, e, store.DeadNote{Reason: string(msgstate.RetriesExhausted), MessageID: e.ID, Detail: detail})
	p.finishRun(ctx, run, store.OutcomeDeadLettered)
	if fireHook {
		p.runMessageHook(ctx, cfg, e, run, "onDeadLetter", len(s.Attempts), s.ExitCode, false)
	}
}

// haltMessage dead-letters a message whose revert failed: the tree no
// longer matches its checkpoint, which needs a person.
func (p *Pipeline) haltMessage(ctx context.Context, m *msg, err error) {
	e, run := m.e, m.run
	if ctx.Err() != nil {
		// The revert was cut short by the shutdown; the next controller
		// computes it afresh from the checkpoint.
		p.log.Info("revert interrupted by shutdown", "message", e.ID)
		return
	}
	p.log.Error("revert failed", "message", e.ID, "err", err)
	p.step(m, func(v msgstate.Msg) (msgstate.Msg, error) { return msgstate.Kill(v, msgstate.RevertFailed) })
	p.deadLetter(ctx, e, store.DeadNote{Reason: string(msgstate.RevertFailed), MessageID: e.ID,
		Detail: fmt.Sprintf("Reverting to the checkpoint failed, so the working tree may not match .decree/runs/%s/manifest.json: %v\nInspect the tree (changes.diff shows the last known change), fix it, then requeue.", e.ID, err)})
	p.finishRun(ctx, run, store.OutcomeDeadLettered)
}

func (p *Pipeline) finishRun(ctx context.Context, run *store.Run, outcome string) {
	if _, err := run.Finish(outcome); err != nil {
		p.log.Error("write run.json", "message", run.ID(), "err", err)
	}
	p.unpruned.Add(1)
}

// deadLetterUnrun dead-letters a message that never ran.
func (p *Pipeline) deadLetterUnrun(ctx context.Context, e store.Entry, note store.DeadNote) {
	if note.MessageID == "" {
		note.MessageID = e.ID
	}
	p.deadLetter(ctx, e, note)
}

func (p *Pipeline) deadLetter(ctx context.Context, e store.Entry, note store.DeadNote) {
	if _, err := p.d.Store.DeadLetter(e.File, note); err != nil && !errors.Is(err, os.ErrNotExist) {
		p.log.Error("dead-letter", "message", e.ID, "err", err)
	}
	p.emit(ctx, &events.Event{Kind: events.MessageDead, MessageID: e.ID, Chain: e.Chain,
		Text: note.Reason + ": " + firstLine(note.Detail)})
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
	p.running = r
}

// routineResolveError explains a routine that cannot be used.
func routineResolveError(name string, err error) store.DeadNote {
	reason := "InvalidRoutine"
	if errors.Is(err, routine.ErrRoutineNotFound) {
		reason = "RoutineNotFound"
	}
	return store.DeadNote{Reason: reason, Detail: fmt.Sprintf("%v\nAdd the routine to .decree/routines/ or name another with `routine:` in the message, then requeue it.", err)}
}
