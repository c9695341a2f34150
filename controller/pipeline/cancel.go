package pipeline

import (
	"context"
	"fmt"

	"github.com/decreehq/decree/controller/events"
	"github.com/decreehq/decree/controller/msgstate"
	"github.com/decreehq/decree/controller/store"
	"github.com/decreehq/decree/pkg/usage"
)

// Cancelling a message, in one place.
//
// A client's cancel of a message that ran (it is running now, or an
// attempt of it was interrupted) is first recorded in the message's state
// machine (msgstate.RequestCancel, in state.json); only then is anything
// stopped. The loop's next step is then always StepCancel, also after a
// crash or restart: an open attempt is closed, the tree is reverted to the
// checkpoint, and the message is dead-lettered (reason Cancelled) and
// filed. A message that never ran is simply dead-lettered. A message
// selected but whose run directory does not exist yet (its routine is
// being chosen) keeps the request in memory until the run exists; if the
// controller stops before that, nothing ran and the message stays queued.

// running describes the message in progress.
type running struct {
	id      string
	routine string
	attempt int
	cancel  context.CancelFunc
	// run is set once the run directory exists; pending holds a cancel
	// request made before that.
	run     *store.Run
	pending string
	// seq orders the running messages by start.
	seq int
	// routerUsage is the usage of routing calls made for the message
	// before its run existed (router_usage.go).
	routerUsage []usage.Record
}

// attach records that r's run exists and returns a cancel request made
// before it. p.mu is not held.
func (r *running) attach(run *store.Run) (string, bool) {
	r.run = run
	return r.pending, r.pending != ""
}

// cancelled returns a cancel request made before the run existed.
func (r *running) cancelled() (string, bool) { return r.pending, r.pending != "" }

// Cancel stops a running message (its attempt is stopped, the tree
// reverted, the message dead-lettered) or dead-letters a queued one.
func (p *Pipeline) Cancel(ctx context.Context, idOrFile, reason string) (store.Entry, error) {
	if reason == "" {
		reason = "cancelled by a client"
	}
	p.mu.Lock()
	r := p.running[idOrFile]
	if r != nil {
		run := r.run
		if run == nil {
			if r.pending == "" {
				r.pending = reason
			}
		}
		p.mu.Unlock()
		if run != nil {
			if _, err := run.Step(func(v msgstate.Msg) (msgstate.Msg, error) { return msgstate.RequestCancel(v, reason) }); err != nil {
				return store.Entry{}, fmt.Errorf("record the cancel request of %s: %w", r.id, err)
			}
		}
		r.cancel()
		return store.Entry{ID: r.id}, nil
	}
	p.mu.Unlock()
	entries, err := p.d.Store.ListInbox()
	if err != nil {
		return store.Entry{}, err
	}
	for _, e := range entries {
		if e.ID == idOrFile || e.File == idOrFile || e.File == idOrFile+".md" {
			if err := p.cancelQueued(ctx, e, reason); err != nil {
				return store.Entry{}, err
			}
			p.chainMaybeFinished(ctx, e.Chain)
			p.flushHeld(ctx)
			return e, nil
		}
	}
	return store.Entry{}, fmt.Errorf("%w: %q is neither running nor queued", ErrNotFound, idOrFile)
}

// cancelQueued cancels a queued message: one that ran partly (an
// interrupted attempt) is driven through the same cancel step as a running
// one, while the loop waits; one that never ran is dead-lettered.
func (p *Pipeline) cancelQueued(ctx context.Context, e store.Entry, reason string) error {
	run, err := p.d.Store.OpenRun(e.ID)
	if e.ID == "" || err != nil || run.State().Outcome != "" || len(run.State().Attempts) == 0 {
		p.deadLetterUnrun(ctx, e, store.DeadNote{Reason: string(msgstate.Cancelled), MessageID: e.ID, Detail: reason})
		return nil
	}
	if !p.work.TryLock() {
		rid, _, _, _ := p.Running()
		return fmt.Errorf("%w: %s ran partly and its changes must be reverted, but %s is running now; cancel it once that one finished", ErrBusy, e.ID, rid)
	}
	defer p.work.Unlock()
	cfg, _ := p.d.Config()
	m := &msg{e: e, cfg: cfg, run: run, lane: p.runLane(run)}
	if _, err := run.Step(func(v msgstate.Msg) (msgstate.Msg, error) { return msgstate.RequestCancel(v, reason) }); err != nil {
		return fmt.Errorf("record the cancel request of %s: %w", e.ID, err)
	}
	p.drive(ctx, ctx, m)
	if !m.filed {
		return fmt.Errorf("cancel %s: it could not be filed; see the controller's log", e.ID)
	}
	return nil
}

// cancelStep carries out a recorded cancel request.
func (p *Pipeline) cancelStep(ctx context.Context, m *msg, v msgstate.Msg) error {
	reason := v.Cancel
	if reason == "" {
		reason = "cancelled by a client"
	}
	p.forgetWait(m.e.ID) // a reply can no longer reach it
	switch v.State {
	case msgstate.Queued, msgstate.Claimed, msgstate.Checkpointed:
		// Nothing ran: no revert.
	default:
		if v.State == msgstate.Running && p.d.Leases != nil {
			// Running when the controller died: its routine may still run
			// until the previous controller's leases are fenced.
			if err := p.d.Leases.WaitFenced(ctx); err != nil {
				return errStopped
			}
		}
		if m.manifest == nil {
			man, err := p.readCheckpoint(m)
			if err != nil {
				return err
			}
			m.manifest = man
		}
		if a, ok := m.run.Interrupted(); ok {
			// The open attempt ends here; its diff shows what it did.
			_ = m.run.FinishAttempt(a.N, -1, "cancelled: "+reason)
			_, _ = p.writeDiff(ctx, m.run, m.manifest, a.N)
			if a.Status == store.AttemptRunning { // an interrupted one was announced already
				p.emit(ctx, &events.Event{Kind: events.AttemptFinished, MessageID: m.e.ID, Chain: m.e.Chain, Attempt: a.N, ExitCode: -1, Text: "cancelled: " + reason})
			}
		}
		if err := p.record(m, func(v msgstate.Msg) (msgstate.Msg, error) { return msgstate.Revert(v, msgstate.ForCancel) }); err != nil {
			return err
		}
		if err := p.revert(ctx, m.run, m.manifest); err != nil {
			return p.afterRevertError(ctx, m, err)
		}
	}
	if err := p.record(m, func(v msgstate.Msg) (msgstate.Msg, error) { return msgstate.Kill(v, msgstate.Cancelled) }); err != nil {
		return err
	}
	return p.file(ctx, m)
}
