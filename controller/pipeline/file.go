package pipeline

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/decreehq/decree/controller/events"
	"github.com/decreehq/decree/controller/msgstate"
	"github.com/decreehq/decree/controller/store"
	"github.com/decreehq/decree/pkg/config"
	"github.com/decreehq/decree/pkg/layout"
	"github.com/decreehq/decree/pkg/message"
)

// Filing: the last step of every message that ran. The machine records
// done or dead first; file then moves the inbox file to done/ or dead/
// (when it is still there), marks a spec processed, writes run.json and
// announces the end. Every part is idempotent, so the loop, and the
// controller's start (settleFiled), finish an interrupted filing the same
// way, through the same function.

// complete marks a successful message done and files it. The step is
// staged, not written: it has no effect of its own, and the state goes to
// disk with the filing's own write (Run.Finish), after the message left
// the inbox. A crash in between leaves a collected machine whose message
// is out of the inbox, which settleFiled completes at the next start
// exactly as here.
func (p *Pipeline) complete(ctx context.Context, m *msg) error {
	if _, err := m.run.Stage(msgstate.Complete); err != nil {
		return err
	}
	return p.file(ctx, m)
}

// exhausted reverts and dead-letters a message whose attempts all failed.
func (p *Pipeline) exhausted(ctx context.Context, m *msg) error {
	if v := m.run.Machine(); v.State == msgstate.Reverting && v.Why == msgstate.ForCancel {
		return p.cancelStep(ctx, m, v)
	}
	return p.revertAndKill(ctx, m, msgstate.AfterExhausted, msgstate.RetriesExhausted)
}

// revertAndKill records the revert (why), puts the tree back to the
// checkpoint, then records the dead letter (reason) and files it.
func (p *Pipeline) revertAndKill(ctx context.Context, m *msg, why msgstate.RevertCause, reason msgstate.Reason) error {
	if err := p.record(m, func(v msgstate.Msg) (msgstate.Msg, error) { return msgstate.Revert(v, why) }); err != nil {
		return err
	}
	if err := p.revert(ctx, m.run, m.manifest); err != nil {
		return p.afterRevertError(ctx, m, err)
	}
	if err := p.record(m, func(v msgstate.Msg) (msgstate.Msg, error) { return msgstate.Kill(v, reason) }); err != nil {
		return err
	}
	return p.file(ctx, m)
}

// file moves a message whose machine is final out of the inbox and writes
// its run.json. onDeadLetter fires when this call moved a message that
// exhausted its attempts (not one a beforeEach hook kept from running).
func (p *Pipeline) file(ctx context.Context, m *msg) error {
	v := m.run.Machine()
	e, run, st := m.e, m.run, p.d.Store
	inInbox := false
	if _, err := os.Lstat(filepath.Join(st.Dir(), layout.Inbox, e.File)); err == nil {
		inInbox = true
	}
	p.settleUsage(m)
	switch v.State {
	case msgstate.Done:
		if inInbox {
			if _, err := st.MarkDone(e.File); err != nil {
				return fmt.Errorf("move %s to done/: %w", e.File, err)
			}
		}
		if e.Message != nil && e.Message.Type() == message.TypeSpec && m.cfg != nil {
			if err := st.MarkProcessed(specName(m.cfg, e.Message.InputFile())); err != nil {
				return fmt.Errorf("mark %s processed: %w", e.Message.InputFile(), err)
			}
		}
		p.finishRun(run, store.OutcomeSucceeded)
		p.emit(ctx, &events.Event{Kind: events.MessageDone, MessageID: e.ID, Chain: e.Chain, Routine: run.State().Routine})
	case msgstate.Dead:
		note := m.note
		if note == nil {
			note = p.deadNote(m, v)
		}
		if inInbox {
			if _, err := st.DeadLetter(e.File, *note); err != nil && !errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("move %s to dead/: %w", e.File, err)
			}
		}
		outcome := store.OutcomeDeadLettered
		if v.Reason == msgstate.Cancelled {
			outcome = store.OutcomeCancelled
		}
		p.finishRun(run, outcome)
		p.emit(ctx, &events.Event{Kind: events.MessageDead, MessageID: e.ID, Chain: e.Chain, Text: note.Reason + ": " + firstLine(note.Detail)})
		if inInbox && (v.Reason == msgstate.RetriesExhausted || v.Reason == msgstate.BudgetExceeded) && !v.Blocked && m.cfg != nil {
			s := run.State()
			p.runMessageHook(ctx, m.cfg, e, run, "onDeadLetter", len(s.Attempts), s.ExitCode, false)
		}
	default:
		return fmt.Errorf("file %s: its state %s is not final", e.ID, v.State)
	}
	m.filed = true
	p.forgetWait(e.ID)
	return nil
}

// deadNote is the note of a message dead-lettered for v.Reason.
func (p *Pipeline) deadNote(m *msg, v msgstate.Msg) *store.DeadNote {
	s := m.run.State()
	note := &store.DeadNote{Reason: string(v.Reason), MessageID: m.e.ID}
	switch v.Reason {
	case msgstate.RetriesExhausted:
		note.Detail = fmt.Sprintf("All %d attempt(s) of routine %s failed; the tree was reverted to the checkpoint. Logs and diffs of every attempt are in .decree/runs/%s/.\n\n%s",
			len(s.Attempts), s.Routine, m.e.ID, attemptSummary(s))
	case msgstate.BudgetExceeded:
		note.Detail = budgetNote(m.e.ID, s)
	case msgstate.Cancelled:
		note.Detail = v.Cancel + "\nThe tree was reverted to the checkpoint; requeue the message to run it again."
	default:
		note.Detail = fmt.Sprintf("The message was dead-lettered (%s); see .decree/runs/%s/.", v.Reason, m.e.ID)
	}
	return note
}

func (p *Pipeline) finishRun(run *store.Run, outcome string) {
	if _, err := run.Finish(outcome); err != nil {
		p.log.Error("write run.json", "message", run.ID(), "err", err)
	}
	p.unpruned.Add(1)
}

// deadLetterUnrun dead-letters a message that never ran (no run directory).
func (p *Pipeline) deadLetterUnrun(ctx context.Context, e store.Entry, note store.DeadNote) {
	if note.MessageID == "" {
		note.MessageID = e.ID
	}
	if _, err := p.d.Store.DeadLetter(e.File, note); err != nil && !errors.Is(err, os.ErrNotExist) {
		p.log.Error("dead-letter", "message", e.ID, "err", err)
	}
	p.emit(ctx, &events.Event{Kind: events.MessageDead, MessageID: e.ID, Chain: e.Chain,
		Text: note.Reason + ": " + firstLine(note.Detail)})
}

// settleFiled finishes, at the controller's start, the filing of runs
// whose message left the inbox before run.json was written (a message
// leaves the inbox first so that it can never run twice). Runs whose
// machine is final go through file, like the loop's own; state files of
// older versions (no machine) are finished from their attempts.
func (p *Pipeline) settleFiled(ctx context.Context) {
	inbox := map[string]bool{}
	if entries, err := p.d.Store.ListInbox(); err == nil {
		for _, e := range entries {
			inbox[e.File] = true
		}
	}
	var cfg *config.Config
	if p.d.Config != nil {
		cfg, _ = p.d.Config()
	}
	for _, id := range p.d.Store.UnfinishedRuns() {
		run, err := p.d.Store.OpenRun(id)
		if err != nil {
			continue
		}
		st := run.State()
		if st.Outcome != "" || inbox[st.File] {
			continue
		}
		if completing := msgstate.Next(st.Machine) == msgstate.StepComplete; st.Machine.Final() || completing {
			chain, seq, _ := message.SplitID(id)
			e := store.Entry{File: st.File, ID: id, Chain: chain, Seq: seq}
			if mm, err := p.messageOf(run); err == nil {
				e.Message = mm
			}
			m := &msg{e: e, cfg: cfg, run: run}
			p.log.Info("finishing the record of a message filed before the controller stopped", "message", id)
			file := p.file
			if completing { // left the inbox with its completion staged (complete)
				file = p.complete
			}
			if err := file(ctx, m); err != nil {
				p.log.Error("finish a filed run", "message", id, "err", err)
			}
			continue
		}
		switch {
		case st.Phase == "exhausted":
			_, _ = run.Finish(store.OutcomeDeadLettered)
		case st.Phase == "succeeded" || lastSucceeded(st):
			_, _ = run.Finish(store.OutcomeSucceeded)
		}
	}
}

// lastSucceeded reports whether a run's last attempt succeeded.
func lastSucceeded(st store.RunState) bool {
	n := len(st.Attempts)
	return n > 0 && st.Attempts[n-1].Status == store.AttemptSucceeded
}
