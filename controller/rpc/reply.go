package rpc

import (
	"context"
	"errors"
	"fmt"

	"github.com/decreehq/decree/controller/pipeline"
	"github.com/decreehq/decree/controller/store"
	decreev1 "github.com/decreehq/decree/proto/decree/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// maxReplyNote bounds a reply's note.
const maxReplyNote = 1 << 20

// Reply answers a message waiting for a person (pipeline.Reply records it
// durably before this returns).
func (s *ControllerServer) Reply(ctx context.Context, req *decreev1.ReplyRequest) (*decreev1.ReplyResponse, error) {
	if req.GetTo() == "" || req.GetOption() == "" {
		return nil, status.Error(codes.InvalidArgument, "a reply needs `to` (a wait id or message id) and `option`; `decreectl waits` lists both")
	}
	if len(req.GetNote()) > maxReplyNote {
		return nil, status.Errorf(codes.InvalidArgument, "the note is %d bytes; at most %d are allowed (put a longer text in a file of the project and name it)", len(req.GetNote()), maxReplyNote)
	}
	if k := req.GetRequestId(); k != "" {
		if err := store.CheckRequestID(k); err != nil {
			return nil, status.Error(codes.InvalidArgument, err.Error())
		}
	}
	w, err := s.d.Pipeline.Reply(ctx, pipeline.ReplyRequest{To: req.GetTo(), Option: req.GetOption(), Note: req.GetNote(), RequestID: req.GetRequestId(), Via: "api"})
	if err != nil {
		return nil, replyStatus(err)
	}
	return &decreev1.ReplyResponse{Wait: waitProto(w), Option: req.GetOption()}, nil
}

// ListWaits lists the messages waiting for a person.
func (s *ControllerServer) ListWaits(context.Context, *decreev1.ListWaitsRequest) (*decreev1.ListWaitsResponse, error) {
	resp := &decreev1.ListWaitsResponse{}
	for _, w := range s.d.Pipeline.Waits() {
		resp.Waits = append(resp.Waits, waitProto(w))
	}
	return resp, nil
}

func waitProto(w pipeline.WaitInfo) *decreev1.Wait {
	out := &decreev1.Wait{Id: w.ID, MessageId: w.MessageID, Chain: w.Chain, Routine: w.Routine, Kind: w.Kind,
		Attempt: int32(w.Attempt), Question: w.Question, ReplyCommand: fmt.Sprintf("decreectl reply %s OPTION [-m NOTE]", w.ID)}
	for _, o := range w.Options {
		out.Options = append(out.Options, &decreev1.WaitOption{Name: o.Name, Meaning: o.Meaning})
	}
	if !w.Asked.IsZero() {
		out.Asked = timestamppb.New(w.Asked)
	}
	if !w.Deadline.IsZero() {
		out.Deadline = timestamppb.New(w.Deadline)
	}
	return out
}

// replyStatus maps a refused reply to its gRPC code.
func replyStatus(err error) error {
	switch {
	case errors.Is(err, pipeline.ErrBadOption):
		return status.Error(codes.InvalidArgument, err.Error())
	case errors.Is(err, pipeline.ErrAnswered):
		return status.Error(codes.AlreadyExists, err.Error())
	case errors.Is(err, pipeline.ErrNotWaiting):
		return status.Error(codes.FailedPrecondition, err.Error())
	}
	return Status(err)
}

// withWait marks a queued message that waits for a person.
func (s *ControllerServer) withWait(mi *decreev1.MessageInfo) *decreev1.MessageInfo {
	if mi.GetState() == decreev1.MessageState_MESSAGE_STATE_QUEUED && s.d.Pipeline.IsWaiting(mi.GetId()) {
		mi.State = decreev1.MessageState_MESSAGE_STATE_WAITING
	}
	return mi
}
