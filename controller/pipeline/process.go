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

// process handles one message from selection to done or dead.
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
	if reason, ok := p.cancelled(e.ID); ok {
		p.deadLetterUnrun(ctx, e, store.DeadNote{Reason: "Cancelled", MessageID: e.ID, Detail: reason})
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
	st := p.d.Store
	maxAttempts := cfg.AttemptsFor(rt.Name)
	run, err := st.StartRun(store.RunStart{Entry: e, Routine: rt.Name, Trigger: trigger(e), Migration: migrationOf(cfg, e), MaxAttempts: maxAttempts})
	if err != nil {
		if p.noSpace(ctx, err) {
			return // stays queued; the loop waits for space
		}
		p.deadLetterUnrun(ctx, e, store.DeadNote{Reason: "RunDirectoryFailed", MessageID: e.ID, Detail: err.Error()})
		return
	}
	if s := run.State(); s.MaxAttempts > 0 {
		maxAttempts = s.MaxAttempts
	}

	p.emit(ctx, &events.Event{Kind: events.MessageStarted, MessageID: e.ID, Chain: e.Chain, Routine: rt.Name})
	manifest, err := p.checkpoint(runCtx, run)
	if err != nil {
		if reason, ok := p.cancelled(e.ID); ok {
			p.deadLetterUnrun(ctx, e, store.DeadNote{Reason: "Cancelled", MessageID: e.ID, Detail: reason})
			p.finishRun(ctx, run, store.OutcomeCancelled)
			return
		}
		log.Error("checkpoint", "err", err)
		p.deadLetterUnrun(ctx, e, store.DeadNote{Reason: "CheckpointFailed", MessageID: e.ID,
			Detail: fmt.Sprintf("Taking the checkpoint before the first attempt failed: %v", err)})
		p.finishRun(ctx, run, store.OutcomeDeadLettered)
		return
	}
	if a, ok := run.Interrupted(); ok {
		_ = run.FinishAttempt(a.N, -1, "controller restarted during the attempt")
		p.emit(ctx, &events.Event{Kind: events.AttemptFinished, MessageID: e.ID, Chain: e.Chain,
			Attempt: a.N, ExitCode: -1, Text: "controller restarted during the attempt"})
		if err := p.writeDiff(runCtx, run, manifest, a.N); err != nil {
			log.Error("diff after interrupted attempt", "err", err)
		}
	}

	succeeded := runSucceeded(run.State())
	lastBlockedByHook := false
	for !succeeded && run.State().Phase != phaseExhausted {
		n := len(run.State().Attempts) + 1
		if n > maxAttempts {
			_ = run.Update(func(s *store.RunState) error { s.Phase = phaseExhausted; return nil })
			break
		}
		if err := p.pauseForUsageLimit(runCtx, e, run, n); err != nil {
			if reason, ok := p.cancelled(e.ID); ok && ctx.Err() == nil {
				p.cancelMessage(ctx, e, run, manifest, reason)
			}
			return // stopping: the message stays queued and waits again after a restart
		}
		if n == maxAttempts && n > 1 {
			if err := p.revert(runCtx, run, manifest); err != nil {
				p.haltMessage(ctx, e, run, err)
				return
			}
			if err := p.writeFailureContext(run); err != nil {
				log.Error("failure context", "err", err)
			}
		}
		res, err := p.attempt(runCtx, cfg, e, rt, run, n, maxAttempts, manifest)
		if err != nil {
			if ctx.Err() != nil {
				return // shutting down: the attempt stays "running" and is redone after a restart
			}
			if reason, ok := p.cancelled(e.ID); ok {
				p.cancelMessage(ctx, e, run, manifest, reason)
				return
			}
			log.Error("attempt", "attempt", n, "err", err)
		}
		lastBlockedByHook = res.blockedByHook
		if res.ok {
			succeeded = true // recorded by the attempt's status (runSucceeded)
		} else if !res.blockedByHook {
			if budget, limited := p.usageLimited(runCtx, cfg, e, run, manifest, n); limited {
				maxAttempts = budget // the limited attempt does not count
			}
		}
	}
	if succeeded {
		p.complete(ctx, cfg, e, run)
		return
	}
	p.exhausted(ctx, cfg, e, run, manifest, !lastBlockedByHook)
}

// checkpoint returns the message's manifest, taking it on first use.
func (p *Pipeline) checkpoint(ctx context.Context, run *store.Run) (*checkpoint.Manifest, error) {
	mpath, err := run.Path(layout.ManifestFile)
	if err != nil {
		return nil, err
	}
	// Once an attempt began, the manifest on disk is the checkpoint. Before
	// that the tree is still as it was, so a manifest written by an
	// interrupted earlier start is simply taken again.
	if st := run.State(); st.Phase != "" || len(st.Attempts) > 0 {
		return checkpoint.ReadManifest(mpath)
	}
	m, err := p.d.Checkpoints.Snapshot(ctx, p.d.Store.Root())
	if err != nil {
		return nil, err
	}
	return m, checkpoint.WriteManifest(mpath, m)
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
func (p *Pipeline) complete(ctx context.Context, cfg *config.Config, e store.Entry, run *store.Run) {
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
func (p *Pipeline) exhausted(ctx context.Context, cfg *config.Config, e store.Entry, run *store.Run, manifest *checkpoint.Manifest, fireHook bool) {
	_ = run.Update(func(s *store.RunState) error { s.Phase = phaseExhausted; return nil })
	if err := p.revert(ctx, run, manifest); err != nil {
		p.haltMessage(ctx, e, run, err)
		return
	}
	s := run.State()
	detail := fmt.Sprintf("All %d attempt(s) of routine %s failed; the tree was reverted to the checkpoint. Logs and diffs of every attempt are in .decree/runs/%s/.\n\n%s",
		len(s.Attempts), s.Routine, e.ID, attemptSummary(s))
	p.deadLetter(ctx, e, store.DeadNote{Reason: "RetriesExhausted", MessageID: e.ID, Detail: detail})
	p.finishRun(ctx, run, store.OutcomeDeadLettered)
	if fireHook {
		p.runMessageHook(ctx, cfg, e, run, "onDeadLetter", len(s.Attempts), s.ExitCode, false)
	}
}

// haltMessage dead-letters a message whose revert failed: the tree no
// longer matches its checkpoint, which needs a person.
func (p *Pipeline) haltMessage(ctx context.Context, e store.Entry, run *store.Run, err error) {
	p.log.Error("revert failed", "message", e.ID, "err", err)
	p.deadLetter(ctx, e, store.DeadNote{Reason: "RevertFailed", MessageID: e.ID,
		Detail: fmt.Sprintf("Reverting to the checkpoint failed, so the working tree may not match .decree/runs/%s/manifest.json: %v\nInspect the tree (changes.diff shows the last known change), fix it, then requeue.", e.ID, err)})
	p.finishRun(ctx, run, store.OutcomeDeadLettered)
}

func (p *Pipeline) finishRun(ctx context.Context, run *store.Run, outcome string) {
	if _, err := run.Finish(outcome); err != nil {
		p.log.Error("write run.json", "message", run.ID(), "err", err)
	}
	p.prune(ctx)
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
