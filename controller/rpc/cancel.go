package rpc

import (
	"context"
	"errors"

	"github.com/decreehq/decree/controller/events"
	"github.com/decreehq/decree/controller/store"
	decreev1 "github.com/decreehq/decree/proto/decree/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// CancelMessage cancels a queued or running message and returns once it is
// dead-lettered: for a running message that is after the worker confirmed
// that the routine stopped (or its lease ran out) and the tree was
// reverted, which the loop reports with MESSAGE_DEAD.
func (s *ControllerServer) CancelMessage(ctx context.Context, req *decreev1.CancelMessageRequest) (*decreev1.CancelMessageResponse, error) {
	id := req.GetId()
	if v, err := s.d.Store.FindMessage(id); err == nil {
		switch v.State {
		case store.StateDone:
			return nil, status.Errorf(codes.FailedPrecondition, "message %s already finished successfully; there is nothing to cancel (RevertMessage undoes its changes)", v.ID)
		case store.StateDead:
			return nil, status.Errorf(codes.FailedPrecondition, "message %s is already dead-lettered (%s); there is nothing to cancel", v.ID, v.Problem)
		}
		if v.ID != "" {
			id = v.ID
		}
	}
	// Watch before cancelling, so the final event cannot slip by.
	from := s.d.Events.Last() + 1
	e, err := s.d.Service.Cancel(ctx, id, req.GetReason())
	if err != nil {
		return nil, Status(err)
	}
	if err := waitFinal(ctx, s.d.Events, e.ID, from); err != nil {
		return nil, Status(err)
	}
	resp := &decreev1.CancelMessageResponse{Message: &decreev1.MessageInfo{Id: e.ID, Chain: e.Chain, State: decreev1.MessageState_MESSAGE_STATE_DEAD}}
	if v, err := s.d.Store.FindMessage(e.ID); err == nil {
		resp.Message = s.messageView(v)
	}
	return resp, nil
}

// finalKinds end a message's life.
func isFinal(ev *events.Event) bool {
	return ev.Kind == events.MessageDone || ev.Kind == events.MessageDead
}

// waitFinal waits for the MESSAGE_DONE or MESSAGE_DEAD event of id at or
// after sequence from.
func waitFinal(ctx context.Context, log *events.Log, id string, from uint64) error {
	for {
		w := log.Watch(events.WatchOptions{From: from, Follow: true, Filter: func(ev *events.Event) bool {
			return ev.MessageID == id && isFinal(ev)
		}})
		_, err := w.Next(ctx)
		w.Close()
		var slow *events.SlowWatcherError
		if errors.As(err, &slow) {
			from = slow.Resume
			continue
		}
		return err
	}
}
