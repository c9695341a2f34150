package auth

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/tap"

	pauth "github.com/decreehq/decree/pkg/auth"
	decreev1 "github.com/decreehq/decree/proto/decree/v1"
)

// need is what a method requires over TCP.
type need int

const (
	needNothing   need = iota // health
	needAnyToken              // reflection
	needClient                // ControllerService
	needWorker                // WorkerService
	needForbidden             // everything else
)

var (
	controllerPrefix = "/" + decreev1.ControllerService_ServiceDesc.ServiceName + "/"
	workerPrefix     = "/" + decreev1.WorkerService_ServiceDesc.ServiceName + "/"
)

// methodNeed maps a full method name ("/pkg.Service/Method") to its need.
// Unknown services are forbidden over TCP, so a service registered later
// is not exposed by accident.
func methodNeed(method string) need {
	switch {
	case strings.HasPrefix(method, controllerPrefix):
		return needClient
	case strings.HasPrefix(method, workerPrefix):
		return needWorker
	case strings.HasPrefix(method, "/grpc.health.v1.Health/"):
		return needNothing
	case strings.HasPrefix(method, "/grpc.reflection.v1.ServerReflection/"),
		strings.HasPrefix(method, "/grpc.reflection.v1alpha.ServerReflection/"):
		return needAnyToken
	}
	return needForbidden
}

// tap is the server's InTapHandle: it runs when a stream's headers arrive,
// before grpc-go reads any of the request body, so a call without a valid
// token costs the server its headers (at most MaxHeaderListBytes), not the
// message it carries. It also holds each remote address to MaxCallsPerHost
// calls in flight. The interceptors below check the token again (cheap),
// so that a server built without the tap is still guarded.
func (g *Guard) tap(ctx context.Context, info *tap.Info) (context.Context, error) {
	if err := g.authorize(ctx, info.FullMethodName); err != nil {
		return ctx, err
	}
	if err := g.calls.admit(ctx, info.FullMethodName); err != nil {
		g.log.Warn("refused a call over the per-address limit", "method", info.FullMethodName, "err", err)
		return ctx, err
	}
	return ctx, nil
}

func (g *Guard) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	if err := g.authorize(ctx, info.FullMethod); err != nil {
		return nil, err
	}
	return h(ctx, req)
}

func (g *Guard) stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
	if err := g.authorize(ss.Context(), info.FullMethod); err != nil {
		return err
	}
	return h(srv, ss)
}

// authorize lets a call through or returns its Unauthenticated or
// PermissionDenied status.
func (g *Guard) authorize(ctx context.Context, method string) error {
	p, ok := peer.FromContext(ctx)
	if ok {
		if _, local := p.AuthInfo.(unixInfo); local {
			return nil
		}
	}
	n := methodNeed(method)
	if n == needNothing {
		return nil
	}
	from := "unknown peer"
	if ok && p.Addr != nil {
		from = p.Addr.String()
	}
	tok, present := bearer(ctx)
	if !present {
		g.log.Warn("refused a call without a token", "method", method, "peer", from)
		return status.Errorf(codes.Unauthenticated, "%s needs a bearer token over TCP: send the metadata \"authorization: Bearer <token>\" with the controller's client token (ControllerService) or worker token (WorkerService)", method)
	}
	role := g.match(tok)
	if role == RoleNone {
		g.log.Warn("refused a call with a wrong token", "method", method, "peer", from)
		return status.Errorf(codes.Unauthenticated, "the token given for %s is not accepted by this controller; check the token file", method)
	}
	switch {
	case n == needAnyToken,
		n == needClient && role == RoleClient,
		n == needWorker && role == RoleWorker:
		return nil
	case n == needClient:
		g.log.Warn("refused a worker token on ControllerService", "method", method, "peer", from)
		return status.Errorf(codes.PermissionDenied, "%s is for clients, and this is a worker token; clients need the controller's client token", method)
	case n == needWorker:
		g.log.Warn("refused a client token on WorkerService", "method", method, "peer", from)
		return status.Errorf(codes.PermissionDenied, "%s is for workers, and this is a client token; workers need the controller's worker token", method)
	}
	g.log.Warn("refused a call to a service not offered over TCP", "method", method, "peer", from)
	return status.Errorf(codes.PermissionDenied, "%s is not offered over TCP", method)
}

// bearer extracts the token from the "authorization" metadata.
func bearer(ctx context.Context) (string, bool) {
	md, _ := metadata.FromIncomingContext(ctx)
	vals := md.Get(pauth.MetadataKey)
	if len(vals) != 1 {
		return "", false
	}
	v := vals[0]
	if len(v) < len(pauth.BearerPrefix) || !strings.EqualFold(v[:len(pauth.BearerPrefix)], pauth.BearerPrefix) {
		return "", false
	}
	tok := strings.TrimSpace(v[len(pauth.BearerPrefix):])
	return tok, tok != ""
}

// match compares tok with both tokens in constant time: both comparisons
// always run, over fixed-length digests, so neither which token matched nor
// how long the tokens are shows in the timing.
func (g *Guard) match(tok string) Role {
	sum := sha256.Sum256([]byte(tok))
	cl := subtle.ConstantTimeCompare(sum[:], g.client[:]) & boolInt(g.hasCl)
	wk := subtle.ConstantTimeCompare(sum[:], g.worker[:]) & boolInt(g.hasWk)
	switch {
	case cl == 1:
		return RoleClient
	case wk == 1:
		return RoleWorker
	}
	return RoleNone
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
