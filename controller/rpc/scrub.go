package rpc

import (
	"context"
	"path/filepath"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/status"
)

// Scrubber keeps the controller's absolute paths out of status messages:
// a client elsewhere cannot use them, and they reveal the server's layout.
// Paths inside the project become relative to its root ("." for the root
// itself); the details of a status are kept.
type Scrubber struct {
	root string
}

// NewScrubber scrubs paths under root.
func NewScrubber(root string) *Scrubber { return &Scrubber{root: filepath.Clean(root)} }

// Message rewrites one status message.
func (s *Scrubber) Message(msg string) string {
	if s.root == "" || s.root == "/" {
		return msg
	}
	msg = strings.ReplaceAll(msg, s.root+string(filepath.Separator), "")
	return strings.ReplaceAll(msg, s.root, ".")
}

// Err rewrites err's status message, keeping its code and details.
func (s *Scrubber) Err(err error) error {
	if err == nil {
		return nil
	}
	st, ok := status.FromError(err)
	if !ok {
		return err
	}
	msg := s.Message(st.Message())
	if msg == st.Message() {
		return err
	}
	p := st.Proto()
	p.Message = msg
	return status.FromProto(p).Err()
}

// Unary is the interceptor for unary calls.
func (s *Scrubber) Unary(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	resp, err := h(ctx, req)
	return resp, s.Err(err)
}

// Stream is the interceptor for streaming calls.
func (s *Scrubber) Stream(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
	return s.Err(h(srv, ss))
}
