// Package inproc serves gRPC client-streaming calls in the caller's own
// process: a ClientStream is a grpc.ClientStreamingClient whose Send and
// CloseAndRecv are plain functions, so code written against the generated
// client (a worker shipping its logs) can call a server in the same process
// without encoding messages or going through a socket.
package inproc

import (
	"context"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// ClientStream is an in-process client stream of Req messages answered by
// one Resp. SendFunc and CloseFunc must be set; Ctx is the call's context.
type ClientStream[Req, Resp any] struct {
	Ctx context.Context
	// SendFunc handles one message; like a gRPC client stream's Send it
	// returns io.EOF once the call has ended, CloseFunc then saying why.
	SendFunc func(*Req) error
	// CloseFunc ends the call with its answer or its status error.
	CloseFunc func() (*Resp, error)
}

var _ grpc.ClientStreamingClient[struct{}, struct{}] = (*ClientStream[struct{}, struct{}])(nil)

// Send implements grpc.ClientStreamingClient.
func (s *ClientStream[Req, Resp]) Send(m *Req) error { return s.SendFunc(m) }

// CloseAndRecv implements grpc.ClientStreamingClient.
func (s *ClientStream[Req, Resp]) CloseAndRecv() (*Resp, error) { return s.CloseFunc() }

// Header implements grpc.ClientStream: an in-process call has no metadata.
func (s *ClientStream[Req, Resp]) Header() (metadata.MD, error) { return metadata.MD{}, nil }

// Trailer implements grpc.ClientStream.
func (s *ClientStream[Req, Resp]) Trailer() metadata.MD { return metadata.MD{} }

// CloseSend implements grpc.ClientStream; the answer comes from CloseAndRecv.
func (s *ClientStream[Req, Resp]) CloseSend() error { return nil }

// Context implements grpc.ClientStream.
func (s *ClientStream[Req, Resp]) Context() context.Context { return s.Ctx }

// SendMsg implements grpc.ClientStream for a *Req.
func (s *ClientStream[Req, Resp]) SendMsg(m any) error {
	req, ok := m.(*Req)
	if !ok {
		return status.Errorf(codes.Internal, "in-process stream: a %T is not the request type", m)
	}
	return s.SendFunc(req)
}

// RecvMsg implements grpc.ClientStream: it ends the call and merges the
// answer into m (a *Resp, which must be a protocol buffer message).
func (s *ClientStream[Req, Resp]) RecvMsg(m any) error {
	dst, ok := m.(proto.Message)
	if !ok {
		return status.Errorf(codes.Internal, "in-process stream: cannot answer into a %T", m)
	}
	r, err := s.CloseFunc()
	if err != nil {
		return err
	}
	src, ok := any(r).(proto.Message)
	if !ok || dst.ProtoReflect().Descriptor() != src.ProtoReflect().Descriptor() {
		return status.Errorf(codes.Internal, "in-process stream: cannot answer a %T into a %T", r, m)
	}
	proto.Reset(dst)
	proto.Merge(dst, src)
	return nil
}
