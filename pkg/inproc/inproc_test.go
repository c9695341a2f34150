package inproc

import (
	"context"
	"errors"
	"testing"

	decreev1 "github.com/decreehq/decree/proto/decree/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

type upload = ClientStream[decreev1.UploadLogsRequest, decreev1.UploadLogsResponse]

// The generic stream methods reach the same functions as Send and
// CloseAndRecv, and refuse other message types with INTERNAL.
func TestGenericMethods(t *testing.T) {
	var sent []string
	closeErr := error(nil)
	s := &upload{
		Ctx: context.Background(),
		SendFunc: func(r *decreev1.UploadLogsRequest) error {
			sent = append(sent, r.GetLeaseToken())
			return nil
		},
		CloseFunc: func() (*decreev1.UploadLogsResponse, error) {
			if closeErr != nil {
				return nil, closeErr
			}
			return &decreev1.UploadLogsResponse{StoredOffsets: map[string]uint64{"routine": uint64(len(sent))}}, nil
		},
	}
	if err := s.Send(&decreev1.UploadLogsRequest{LeaseToken: "a"}); err != nil {
		t.Fatal(err)
	}
	if err := s.SendMsg(&decreev1.UploadLogsRequest{LeaseToken: "b"}); err != nil {
		t.Fatal(err)
	}
	if err := s.SendMsg(&decreev1.HeartbeatRequest{}); status.Code(err) != codes.Internal {
		t.Errorf("SendMsg of another type = %v, want INTERNAL", err)
	}
	if len(sent) != 2 || sent[0] != "a" || sent[1] != "b" {
		t.Fatalf("sent %v, want [a b]", sent)
	}
	got := &decreev1.UploadLogsResponse{StoredOffsets: map[string]uint64{"stale": 9}}
	if err := s.RecvMsg(got); err != nil || len(got.GetStoredOffsets()) != 1 || got.GetStoredOffsets()["routine"] != 2 {
		t.Fatalf("RecvMsg = %v, %v; want the answer alone", got, err)
	}
	if err := s.RecvMsg(&decreev1.HeartbeatResponse{}); status.Code(err) != codes.Internal {
		t.Errorf("RecvMsg into another type = %v, want INTERNAL", err)
	}
	closeErr = status.Error(codes.OutOfRange, "gap")
	if _, err := s.CloseAndRecv(); !errors.Is(err, closeErr) {
		t.Errorf("CloseAndRecv = %v, want the call's error", err)
	}
	if md, err := s.Header(); err != nil || len(md) != 0 || len(s.Trailer()) != 0 || s.CloseSend() != nil || s.Context() == nil {
		t.Error("Header, Trailer, CloseSend or Context not the empty in-process answers")
	}
}
