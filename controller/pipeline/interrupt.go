package pipeline

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/decreehq/decree/controller/events"
	"github.com/decreehq/decree/controller/msgstate"
	"github.com/decreehq/decree/controller/store"
	"github.com/decreehq/decree/pkg/checkpoint"
	"github.com/decreehq/decree/pkg/layout"
)

// Interrupted and lost attempts.
//
// An attempt is interrupted when the controller shuts down during it
// (Ctrl-C of `run` or `process`, SIGTERM of a daemon or decree-controller):
// that is no failure of the routine. The attempt is recorded as
// interrupted, the tree is put back to where the attempt started (its
// Base: the checkpoint, or the tree as the previous failed attempt left
// it), and the next controller runs the same attempt again, with the same
// number and budget. The interrupted try's logs are kept beside the rerun's
// ("interrupted-1.routine.log").
//
// An attempt is lost when the controller died during it (kill -9, a power
// failure): the next controller finishes it as failed ("controller
// restarted") by the retry rules, after looking at its log for a usage
// limit like any other failed attempt.

// restoreTimeout bounds putting the tree back during a shutdown; what is
// not done then is done by the next controller before the rerun.
const restoreTimeout = 30 * time.Second

// interrupt records that the loop's context ended during m's attempt, and
// puts the tree back to the attempt's base.
func (p *Pipeline) interrupt(m *msg) {
	run := m.run
	a, ok := run.Interrupted()
	if !ok {
		return
	}
	if err := p.record(m, func(v msgstate.Msg) (msgstate.Msg, error) { return msgstate.Interrupt(v, a.N) }); err != nil {
		p.log.Error("record interrupted attempt", "message", run.ID(), "err", err)
		return
	}
	why := "interrupted: the controller stopped during the attempt"
	if err := run.InterruptAttempt(a.N, why); err != nil {
		p.log.Error("record interrupted attempt", "message", run.ID(), "err", err)
	}
	p.emit(context.Background(), &events.Event{Kind: events.AttemptFinished, MessageID: m.e.ID, Chain: m.e.Chain, Attempt: a.N, ExitCode: -1, Text: why})
	// The routine stopped (Dispatch returns once the worker reported or
	// the lease was fenced), so the tree can go back now.
	ctx, cancel := context.WithTimeout(context.Background(), restoreTimeout)
	defer cancel()
	restored := true
	if err := p.restoreBase(ctx, m, run.Machine()); err != nil {
		restored = false
		p.log.Error("put the tree back after an interrupted attempt; the next controller does it before the attempt runs again", "message", run.ID(), "err", err)
	}
	p.mu.Lock()
	p.interrupted = append(p.interrupted, Interruption{MessageID: run.ID(), File: m.e.File, Attempt: a.N, Restored: restored})
	p.mu.Unlock()
}

// resume runs an interrupted attempt again, from its base.
func (p *Pipeline) rerun(ctx, runCtx context.Context, m *msg, v msgstate.Msg) error {
	if err := p.restoreBase(runCtx, m, v); err != nil {
		return p.afterRevertError(ctx, m, err)
	}
	return p.runAttempt(ctx, runCtx, m, v.Attempt)
}

// restoreBase puts the tree back to what v's attempt started from.
func (p *Pipeline) restoreBase(ctx context.Context, m *msg, v msgstate.Msg) error {
	base := m.manifest
	if v.Base > 0 {
		b, err := readTreeAfter(m.run, v.Base)
		if err != nil {
			return fmt.Errorf("read the tree attempt %d left (the start of attempt %d): %w", v.Base, v.Attempt, err)
		}
		base = b
	}
	return p.revert(ctx, m.run, base)
}

// saveTreeAfter records the tree a failed attempt n left, which the next
// attempt starts from (and goes back to if it is interrupted). Its
// contents are in the object store (every snapshot stores them) and kept
// there while the run is unfinished (see prune.go).
func saveTreeAfter(run *store.Run, n int, tree *checkpoint.Manifest) error {
	data, err := checkpoint.MarshalManifest(tree)
	if err != nil {
		return err
	}
	return run.WriteFile(layout.TreeAfterName(n), data)
}

func readTreeAfter(run *store.Run, n int) (*checkpoint.Manifest, error) {
	p, err := run.Path(layout.TreeAfterName(n))
	if err != nil {
		return nil, err
	}
	return checkpoint.ReadManifest(p)
}

// setAsideInterrupted renames the logs of interrupted attempt n to
// "interrupted-K.<name>" before the attempt runs again, so the rerun
// writes fresh logs and the interrupted try stays readable.
func setAsideInterrupted(run *store.Run, n, k int) error {
	ents, err := os.ReadDir(run.Dir())
	if err != nil {
		return err
	}
	for _, de := range ents {
		name := de.Name()
		if de.IsDir() || !attemptLog(name, n) {
			continue
		}
		dst := fmt.Sprintf("interrupted-%d.%s", k, name)
		if err := os.Rename(run.Dir()+"/"+name, run.Dir()+"/"+dst); err != nil {
			return fmt.Errorf("keep the log of interrupted attempt %d: %w", n, err)
		}
		if err := run.Written(dst); err != nil {
			return err
		}
	}
	return nil
}

// attemptLog reports whether name is a log of attempt n (layout.LogName).
func attemptLog(name string, n int) bool {
	if !strings.HasSuffix(name, ".log") || strings.HasPrefix(name, "interrupted-") {
		return false
	}
	if n <= 1 {
		return !strings.Contains(name, ".try-")
	}
	return strings.HasSuffix(name, fmt.Sprintf(".try-%03d.log", n))
}

// finishLost closes an attempt that was running when the controller died:
// it counts as failed unless its log shows a usage limit. The follow-ups
// it wrote are discarded like those of any failed attempt, measured
// against the inbox recorded when it started.
func (p *Pipeline) finishLost(ctx context.Context, m *msg, v msgstate.Msg) error {
	n := v.Attempt
	// The lost attempt's routine may still run on a worker until its
	// lease is fenced: the tree is read (and later reverted) only after.
	if p.d.Leases != nil {
		if err := p.d.Leases.WaitFenced(ctx); err != nil {
			return errStopped
		}
	}
	end := attemptEnd{exitCode: -1, errText: "controller restarted during the attempt"}
	if tree, err := p.writeDiff(ctx, m.run, m.manifest, n); err != nil {
		p.log.Error("diff after a lost attempt", "message", m.e.ID, "err", err)
	} else if err := saveTreeAfter(m.run, n, tree); err != nil {
		return err
	}
	p.afterAttempt(ctx, m, n, &end)
	if before, ok := m.run.InboxSnapshot(); ok {
		unlock := p.laneCollecting(m)
		p.discardFollowUps(m.run, before, n)
		unlock()
	}
	if _, err := m.run.FinishAttemptStep(n, end.exitCode, end.errText, func(v msgstate.Msg) (msgstate.Msg, error) { return msgstate.End(v, n, end.res) }); err != nil {
		return err
	}
	p.emit(ctx, &events.Event{Kind: events.AttemptFinished, MessageID: m.e.ID, Chain: m.e.Chain, Attempt: n, ExitCode: -1, Text: end.errText})
	return nil
}
