package pipeline

import (
	"context"
	"fmt"
	decreev1 "github.com/decreehq/decree/proto/decree/v1"

	"github.com/decreehq/decree/controller/events"
	"github.com/decreehq/decree/controller/msgstate"
	"github.com/decreehq/decree/controller/store"
	"github.com/decreehq/decree/pkg/checkpoint"
	"github.com/decreehq/decree/pkg/config"
	"github.com/decreehq/decree/pkg/routine"
)

// msg is one message being processed: the single value the loop's steps
// share instead of passing its parts around. Its state machine value
// lives in run (state.json) and changes only through recorded steps
// (record, or the store's Step/Stage and attempt steps).
type msg struct {
	e        store.Entry
	cfg      *config.Config
	rt       routine.Routine
	run      *store.Run
	manifest *checkpoint.Manifest
	max      int
	// note is the dead-letter note of a message killed in this process
	// (file builds one from the machine otherwise).
	note *store.DeadNote
	// filed is set once the message left the inbox and its run.json is
	// written.
	filed bool
	// lane is the lane the message runs in (lane.go), nil outside one;
	// laneFiles are the files its worker returned with the routine's
	// result, delivered when the attempt collects.
	lane      *lane
	laneFiles []*decreev1.ReturnedFile
}

// collect queues the follow-ups of m's successful attempt. The attempt's
// success and the inbox before it are recorded first (End); collection
// only moves files, so a collection cut by a crash is simply done again
// from the same snapshot, and no follow-up is queued twice.
func (p *Pipeline) collect(ctx context.Context, m *msg, before store.InboxSnapshot) error {
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
	_, err = m.run.Stage(msgstate.Collect)
	return err
}
