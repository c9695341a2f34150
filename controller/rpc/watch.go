package rpc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"strconv"
	"strings"

	"github.com/decreehq/decree/controller/events"
	"github.com/decreehq/decree/controller/lease"
	"github.com/decreehq/decree/controller/msgstate"
	"github.com/decreehq/decree/controller/store"
	decreev1 "github.com/decreehq/decree/proto/decree/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// watchCursor is where a WatchMessage stream of message id stands: the
// last event sent, and, inside an attempt's log, the attempt and the next
// byte offset. Ended says the outcome was sent. On the wire it is
// "w2.<id>.<seq>.<attempt>.<offset>" with ".end" appended once ended;
// clients treat it as opaque. The id ties a cursor to its message: a
// cursor of another message (or of an older controller, "w1.") is
// refused.
type watchCursor struct {
	id      string
	seq     uint64
	attempt int
	offset  uint64
	ended   bool
}

func (c watchCursor) String() string {
	s := fmt.Sprintf("w2.%s.%d.%d.%d", c.id, c.seq, c.attempt, c.offset)
	if c.ended {
		s += ".end"
	}
	return s
}

// parseCursor reads a cursor for message id ("" starts at the beginning).
func parseCursor(s, id string) (watchCursor, error) {
	c := watchCursor{id: id}
	if s == "" {
		return c, nil
	}
	bad := status.Errorf(codes.InvalidArgument, "cursor %q is not a WatchMessage cursor; pass the cursor of a response, or none to start from the beginning", s)
	parts := strings.Split(s, ".")
	if len(parts) < 5 || len(parts) > 6 || parts[0] != "w2" || (len(parts) == 6 && parts[5] != "end") {
		return c, bad
	}
	if parts[1] != id {
		return c, status.Errorf(codes.InvalidArgument, "cursor %q belongs to a WatchMessage of message %s, not %s; pass a cursor of this message's stream, or none to start from the beginning", s, parts[1], id)
	}
	var err error
	if c.seq, err = strconv.ParseUint(parts[2], 10, 64); err != nil {
		return c, bad
	}
	if c.attempt, err = strconv.Atoi(parts[3]); err != nil || c.attempt < 0 {
		return c, bad
	}
	if c.offset, err = strconv.ParseUint(parts[4], 10, 64); err != nil {
		return c, bad
	}
	c.ended = len(parts) == 6
	return c, nil
}

// messageWatch is one WatchMessage call.
type messageWatch struct {
	s      *ControllerServer
	id     string
	cur    watchCursor
	stream decreev1.ControllerService_WatchMessageServer
}

func (w *messageWatch) send(r *decreev1.WatchMessageResponse) error {
	r.Cursor = w.cur.String()
	return w.stream.Send(r)
}

// WatchMessage follows one message: its events, the routine log of each
// attempt right after the attempt's ATTEMPT_STARTED, and its outcome. A
// client that reads slowly is never cut off: the events it has not read yet
// are replayed from the event log.
func (s *ControllerServer) WatchMessage(req *decreev1.WatchMessageRequest, stream decreev1.ControllerService_WatchMessageServer) error {
	ctx := stream.Context()
	id := req.GetMessageId()
	if err := store.CheckID(id); err != nil {
		return status.Errorf(codes.InvalidArgument, "message_id %q is not a message id (<chain>-<seq>)", id)
	}
	cur, err := parseCursor(req.GetCursor(), id)
	if err != nil {
		return err
	}
	v, err := s.d.Store.FindMessage(id)
	if err != nil {
		return Status(err)
	}
	w := &messageWatch{s: s, id: id, cur: cur, stream: stream}
	finished := v.State == store.StateDone || v.State == store.StateDead
	if cur.ended {
		return w.sendOutcome(v, "")
	}
	for {
		if w.cur.attempt > 0 {
			if err := w.streamLog(ctx); err != nil {
				return Status(err)
			}
		}
		ev, err := w.nextEvent(ctx, !finished)
		if errors.Is(err, errCaughtUp) {
			// A finished message whose final event the log no longer has
			// (or has not got yet): the store has the outcome.
			if v, err = s.d.Store.FindMessage(id); err != nil {
				return Status(err)
			}
			return w.sendOutcome(v, "")
		}
		if err != nil {
			return Status(err)
		}
		w.cur.seq, w.cur.attempt, w.cur.offset = ev.Sequence, 0, 0
		if ev.Kind == events.AttemptStarted {
			w.cur.attempt = ev.Attempt
		}
		if err := w.send(&decreev1.WatchMessageResponse{Item: &decreev1.WatchMessageResponse_Event{Event: eventProto(ev)}}); err != nil {
			return err
		}
		if isFinal(ev) {
			if ev.Kind == events.MessageDone && ev.Lane != "" {
				// A message of a parallel chain reaches the project tree
				// with its chain's merge: the watch ends with that.
				if mev, err := w.mergeEvent(ctx, ev.Lane); err == nil && mev != nil {
					if err := w.send(&decreev1.WatchMessageResponse{Item: &decreev1.WatchMessageResponse_Event{Event: eventProto(mev)}}); err != nil {
						return err
					}
				} else if ctx.Err() != nil {
					return Status(ctx.Err())
				}
			}
			v, _ := s.d.Store.FindMessage(id)
			reason := ""
			if ev.Kind == events.MessageDead {
				reason = ev.Text
			}
			return w.sendOutcome(v, reason)
		}
	}
}

// errCaughtUp ends a replay-only watch that found no final event.
var errCaughtUp = errors.New("caught up")

// nextEvent returns the message's next event after the cursor. With live
// false it only replays what the log has, then returns errCaughtUp.
func (w *messageWatch) nextEvent(ctx context.Context, live bool) (*events.Event, error) {
	from := w.cur.seq + 1
	for {
		ew := w.s.d.Events.Watch(events.WatchOptions{From: from, Follow: live, Filter: func(ev *events.Event) bool {
			return ev.MessageID == w.id
		}})
		ev, err := ew.Next(ctx)
		ew.Close()
		var slow *events.SlowWatcherError
		switch {
		case errors.As(err, &slow):
			from = slow.Resume
			continue
		case errors.Is(err, io.EOF):
			return nil, errCaughtUp
		}
		return ev, err
	}
}

// streamLog sends the routine log of the cursor's attempt from its offset
// until the attempt ends.
func (w *messageWatch) streamLog(ctx context.Context) error {
	attempt := w.cur.attempt
	var seq uint64
	err := w.s.d.Leases.Follow(ctx, w.id, attempt, lease.DefaultStream, w.cur.offset, func(off uint64, data []byte) error {
		w.cur.offset = off + uint64(len(data))
		c := &decreev1.LogChunk{MessageId: w.id, Attempt: int32(attempt), Stream: lease.DefaultStream, Sequence: seq, Offset: off, Data: data}
		seq++
		return w.send(&decreev1.WatchMessageResponse{Item: &decreev1.WatchMessageResponse_Log{Log: c}})
	})
	if errors.Is(err, fs.ErrNotExist) {
		err = nil // the attempt never wrote a log (its beforeEach hook failed)
	}
	return err
}

// sendOutcome sends the final response.
func (w *messageWatch) sendOutcome(v store.MessageView, reason string) error {
	out := &decreev1.MessageOutcome{MessageId: w.id, State: messageStates[v.State], Reason: reason}
	if v.State == store.StateDead && reason == "" {
		out.Reason = v.Problem
	}
	switch v.State {
	case store.StateDone:
		out.Outcome = decreev1.RunOutcome_RUN_OUTCOME_SUCCEEDED
	case store.StateDead:
		out.Outcome = decreev1.RunOutcome_RUN_OUTCOME_DEAD_LETTERED // also a message rejected before any run
		if strings.HasPrefix(v.Problem, string(msgstate.Cancelled)+":") {
			out.Outcome = decreev1.RunOutcome_RUN_OUTCOME_CANCELLED // cancelled while queued: the dead note's typed reason
		}
	}
	if run, err := w.s.d.Store.OpenRun(w.id); err == nil {
		out.Attempts = int32(len(run.State().Attempts))
		if o, ok := runOutcomes[run.State().Outcome]; ok && run.State().Outcome != "" {
			out.Outcome = o // the run record tells a cancel from a failure
		}
	}
	w.cur.attempt, w.cur.offset, w.cur.ended = 0, 0, true
	return w.send(&decreev1.WatchMessageResponse{Item: &decreev1.WatchMessageResponse_Outcome{Outcome: out}})
}

// mergeEvent returns the CHAIN_MERGED or MERGE_CONFLICT event of lane
// after the cursor: replayed from the log, or awaited while the chain's
// merge has not been recorded yet. Nil when the log no longer has it.
func (w *messageWatch) mergeEvent(ctx context.Context, lane string) (*events.Event, error) {
	filter := func(ev *events.Event) bool {
		return ev.Lane == lane && (ev.Kind == events.ChainMerged || ev.Kind == events.MergeConflict)
	}
	from := w.cur.seq + 1
	for _, live := range []bool{false, true} {
		if live {
			if rec, err := w.s.d.Store.ReadRunRecord(w.id); err == nil && rec.Merge != nil {
				return nil, nil // merged, and the log no longer has the event
			}
		}
		ew := w.s.d.Events.Watch(events.WatchOptions{From: from, Follow: live, Filter: filter})
		ev, err := ew.Next(ctx)
		ew.Close()
		var slow *events.SlowWatcherError
		switch {
		case errors.As(err, &slow):
			from = slow.Resume
			continue
		case errors.Is(err, io.EOF):
			continue
		case err != nil:
			return nil, err
		}
		w.cur.seq = ev.Sequence
		return ev, nil
	}
	return nil, nil
}
