package rpc

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/decreehq/decree/controller/pipeline"
	"github.com/decreehq/decree/controller/store"
	"github.com/decreehq/decree/pkg/auth"
	"github.com/decreehq/decree/pkg/message"
	decreev1 "github.com/decreehq/decree/proto/decree/v1"
	"google.golang.org/protobuf/encoding/protojson"
)

// SubmitMessage validates and queues a root message, once per request_id.
func (s *ControllerServer) SubmitMessage(ctx context.Context, req *decreev1.SubmitMessageRequest) (*decreev1.SubmitMessageResponse, error) {
	if len(req.GetBody()) > auth.MaxBodyBytes {
		return nil, bodyTooLarge()
	}
	sub := submissionOf(req)
	if err := s.validateSubmission(sub); err != nil {
		return nil, err
	}
	sum := sha256.Sum256(req.GetBody())
	return s.submit(ctx, sub, req.GetRequestId(), submissionDigest(req, sum[:], int64(len(req.GetBody()))))
}

// submissionOf is the submission a request describes (its body in memory).
func submissionOf(req *decreev1.SubmitMessageRequest) pipeline.Submission {
	sub := pipeline.Submission{Name: req.GetName(), Body: req.GetBody()}
	for _, f := range req.GetFields() {
		sub.Fields = append(sub.Fields, message.Field{Key: f.GetKey(), Value: f.GetValue()})
	}
	return sub
}

// submit queues a validated submission through the service, once per
// request_id key (every time when key is empty); digest identifies what
// it asks for. The first answer is recorded for replays.
func (s *ControllerServer) submit(ctx context.Context, sub pipeline.Submission, key, digest string) (*decreev1.SubmitMessageResponse, error) {
	res, err := s.d.Service.Submit(ctx, pipeline.SubmitRequest{Submission: sub, RequestID: key, Digest: digest,
		Answer: func(e store.Entry) []byte {
			b, _ := protojson.Marshal(entryInfo(e))
			return b
		}})
	if err != nil {
		return nil, Status(err)
	}
	if res.Replayed {
		return s.replayed(res)
	}
	return &decreev1.SubmitMessageResponse{Message: entryInfo(res.Entry), EventSequence: res.Seq}, nil
}

// replayed answers a repeated request_id with the first call's result:
// the message as it was queued (not as it is now; GetMessage and
// WatchMessage tell that), the same event_sequence, and replayed set.
// A record without the first answer (the controller stopped between
// queuing and recording it) is answered from the message's file, with
// the state of a queued message.
func (s *ControllerServer) replayed(res pipeline.Submitted) (*decreev1.SubmitMessageResponse, error) {
	rec := res.Record
	resp := &decreev1.SubmitMessageResponse{EventSequence: res.Seq, Replayed: true}
	if len(res.Answer) > 0 {
		var info decreev1.MessageInfo
		if err := protojson.Unmarshal(res.Answer, &info); err == nil {
			resp.Message = &info
			return resp, nil
		}
	}
	if v, err := s.d.Store.FindMessage(rec.MessageID); err == nil {
		resp.Message = messageInfo(v)
	} else {
		chain, seq, _ := message.SplitID(rec.MessageID)
		resp.Message = &decreev1.MessageInfo{Id: rec.MessageID, Chain: chain, Seq: int32(seq), Name: strings.TrimSuffix(rec.File, ".md")}
	}
	resp.Message.State, resp.Message.Attempts, resp.Message.DeadReason = decreev1.MessageState_MESSAGE_STATE_QUEUED, 0, ""
	return resp, nil
}

// submissionDigest identifies what a request asks for, request_id aside:
// its name, fields and the body given by its SHA-256 and size, so that a
// body in memory and one streamed in pieces give the same digest.
func submissionDigest(req *decreev1.SubmitMessageRequest, bodySum []byte, bodySize int64) string {
	h := sha256.New()
	fmt.Fprintf(h, "%d:%s\x00%d:%x", len(req.GetName()), req.GetName(), bodySize, bodySum)
	for _, f := range req.GetFields() {
		fmt.Fprintf(h, "\x00%d:%s=%d:%s", len(f.GetKey()), f.GetKey(), len(f.GetValue()), f.GetValue())
	}
	return hex.EncodeToString(h.Sum(nil))
}

// validateSubmission refuses what could never run before anything is
// read or queued (the service's rule).
func (s *ControllerServer) validateSubmission(sub pipeline.Submission) error {
	return Status(s.d.Service.Validate(sub))
}
