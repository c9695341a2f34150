package tracing

import (
	"context"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	decreev1 "github.com/decreehq/decree/proto/decree/v1"
)

// EnvTraceparent is the variable that carries an attempt's trace context
// to its routine, hooks and router call (W3C Trace Context, as OTel SDKs
// and CLIs that trace read it).
const EnvTraceparent = "TRACEPARENT"

// delivery is an assignment of a message attempt as a worker received it.
type delivery struct {
	msg      string
	attempt  int
	kind     decreev1.AssignmentKind
	hook     string
	sent     time.Time
	reported time.Time
}

// maxDeliveries bounds the remembered deliveries (their spans are written
// when the attempt's events come; a lost event must not grow memory).
const maxDeliveries = 10_000

// ServerOptions are the interceptors that give every assignment of a
// message attempt a TRACEPARENT and note when workers received and
// reported it. They only read requests and add to responses.
func (t *Tracer) ServerOptions() []grpc.ServerOption {
	return []grpc.ServerOption{grpc.ChainStreamInterceptor(t.stream), grpc.ChainUnaryInterceptor(t.unary)}
}

func (t *Tracer) stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	if info.FullMethod != decreev1.WorkerService_StreamAssignments_FullMethodName {
		return handler(srv, ss)
	}
	return handler(srv, &assignmentStream{ServerStream: ss, t: t})
}

func (t *Tracer) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	resp, err := handler(ctx, req)
	if info.FullMethod == decreev1.WorkerService_CompleteAssignment_FullMethodName && err == nil {
		if r, ok := req.(*decreev1.CompleteAssignmentRequest); ok {
			t.mu.Lock()
			if d := t.leases[r.GetLeaseToken()]; d != nil && d.reported.IsZero() {
				d.reported = time.Now()
			}
			t.mu.Unlock()
		}
	}
	return resp, err
}

type assignmentStream struct {
	grpc.ServerStream
	t *Tracer
}

func (s *assignmentStream) SendMsg(m any) error {
	resp, ok := m.(*decreev1.StreamAssignmentsResponse)
	a := resp.GetAssignment()
	if !ok || a.GetMessageId() == "" || a.GetAttempt() < 1 {
		return s.ServerStream.SendMsg(m)
	}
	// A copy: the lease manager keeps its own assignment unchanged.
	resp = proto.Clone(resp).(*decreev1.StreamAssignmentsResponse)
	a = resp.GetAssignment()
	if _, set := a.GetEnv()[EnvTraceparent]; !set {
		if a.Env == nil {
			a.Env = map[string]string{}
		}
		a.Env[EnvTraceparent] = Traceparent(s.t.instance, a.GetMessageId(), int(a.GetAttempt()))
	}
	s.t.mu.Lock()
	if len(s.t.leases) < maxDeliveries {
		s.t.leases[a.GetLeaseToken()] = &delivery{msg: a.GetMessageId(), attempt: int(a.GetAttempt()), kind: a.GetKind(),
			hook: strings.ToLower(a.GetEnv()["DECREE_HOOK"]), sent: time.Now()}
	}
	s.t.mu.Unlock()
	return s.ServerStream.SendMsg(resp)
}

// takeDelivery removes and returns the delivery of msg's attempt of kind
// (for hooks: the earliest one not taken yet).
func (t *Tracer) takeDelivery(msg string, attempt int, kind decreev1.AssignmentKind) *delivery {
	var tok string
	var best *delivery
	for k, d := range t.leases {
		if d.msg == msg && d.attempt == attempt && d.kind == kind && (best == nil || d.sent.Before(best.sent)) {
			tok, best = k, d
		}
	}
	if best != nil {
		delete(t.leases, tok)
	}
	return best
}

// forget drops the deliveries of msg.
func (t *Tracer) forget(msg string) {
	for k, d := range t.leases {
		if d.msg == msg {
			delete(t.leases, k)
		}
	}
}
