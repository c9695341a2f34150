package pipeline

import (
	"context"
	"fmt"

	"github.com/decreehq/decree/controller/events"
	"github.com/decreehq/decree/controller/msgstate"
	"github.com/decreehq/decree/controller/store"
	"github.com/decreehq/decree/pkg/checkpoint"
	"github.com/decreehq/decree/pkg/config"
	"github.com/decreehq/decree/pkg/routine"
)

// msg is one message being processed: the single value the loop's steps
// share instead of passing its parts around. Its state machine value
// lives in run (state.json) and changes only through step.
type msg struct {
	e        store.Entry
	cfg      *config.Config
	rt       routine.Routine
	run      *store.Run
	manifest *checkpoint.Manifest
	max      int
}

// step applies a transition of m's state machine and records it in
// state.json before the caller performs its effect (Run.Step); stage
// applies one that is written with the next (Run.Stage). A refused
// transition is a bug in the loop: it is logged, and the value stays.
func (p *Pipeline) step(m *msg, tr func(msgstate.Msg) (msgstate.Msg, error)) msgstate.Msg {
	return p.transition(m, tr, m.run.Step)
}

func (p *Pipeline) stage(m *msg, tr func(msgstate.Msg) (msgstate.Msg, error)) msgstate.Msg {
	return p.transition(m, tr, m.run.Stage)
}

func (p *Pipeline) transition(m *msg, tr func(msgstate.Msg) (msgstate.Msg, error),
	apply func(func(msgstate.Msg) (msgstate.Msg, error)) (msgstate.Msg, error)) msgstate.Msg {
	v, err := apply(tr)
	if err != nil {
		p.log.Error("message state machine", "message", m.run.ID(), "err", err)
		return m.run.Machine()
	}
	return v
}

// finishLost closes an attempt that did not end: the controller died
// during it (running) or stopped for a shutdown (interrupted). It counts
// as failed; the follow-ups it wrote are discarded like those of any
// failed attempt, measured against the inbox recorded when it started.
func (p *Pipeline) finishLost(ctx context.Context, m *msg, v msgstate.Msg) {
	why := "controller restarted during the attempt"
	if v.State == msgstate.Interrupted {
		why = "interrupted: the controller stopped during the attempt"
	}
	if a, ok := m.run.Interrupted(); ok && a.N == v.Attempt {
		_ = m.run.FinishAttempt(a.N, -1, why)
	}
	if before, ok := m.run.InboxSnapshot(); ok {
		p.discardFollowUps(m.run, before, v.Attempt)
	}
	p.step(m, func(v msgstate.Msg) (msgstate.Msg, error) { return msgstate.Finish(v, v.Attempt, false) })
	p.emit(ctx, &events.Event{Kind: events.AttemptFinished, MessageID: m.e.ID, Chain: m.e.Chain, Attempt: v.Attempt, ExitCode: -1, Text: why})
	if err := p.writeDiff(ctx, m.run, m.manifest, v.Attempt); err != nil {
		p.log.Error("diff after interrupted attempt", "message", m.e.ID, "err", err)
	}
}

// collect queues the follow-ups of m's successful attempt. The attempt's
// success and the inbox before it are recorded first (Finish); collection
// only moves files, so a collection cut by a crash is simply done again
// from the same snapshot, and no follow-up is queued twice.
func (p *Pipeline) collect(ctx context.Context, m *msg, before store.InboxSnapshot) {
	e := m.e
	col, err := p.d.Store.CollectFollowUps(e.Chain, e.Seq, before)
	if err != nil {
		p.warn(ctx, e.ID, fmt.Sprintf("collect follow-ups: %v", err))
	}
	for _, f := range col.FollowUps {
		p.emit(ctx, &events.Event{Kind: events.MessageQueued, MessageID: f.ID, Chain: e.Chain, Text: "follow-up " + f.File})
	}
	for _, r := range col.Rejected {
		p.emit(ctx, &events.Event{Kind: events.MessageDead, MessageID: r.Note.MessageID, Chain: e.Chain,
			Text: fmt.Sprintf("%s: follow-up %s of %s rejected: %s", r.Note.Reason, r.Source, e.ID, firstLine(r.Note.Detail))})
	}
	// Written with the next step (Complete): a crash before that collects
	// again from the same snapshot, which finds the same follow-ups in
	// place and queues none twice.
	p.stage(m, msgstate.Collect)
}
