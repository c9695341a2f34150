package auth

import (
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/keepalive"

	pauth "github.com/decreehq/decree/pkg/auth"
)

// Server limits. They apply to every listener, the unix socket included;
// each value is chosen, not inherited:
const (
	// MaxConcurrentStreams per connection. A worker keeps a handful open
	// (its assignment stream, a log upload, a heartbeat, a completion,
	// blob transfers) and a client a few more (following events and logs).
	// 128 leaves room for scripts that multiplex many calls on one
	// connection, while one misbehaving connection cannot open thousands
	// of handlers.
	MaxConcurrentStreams = 128
	// MaxHeaderListBytes bounds a call's metadata. Ours is a token and a
	// few gRPC headers; 64 KiB stops a peer from making the server buffer
	// megabytes of headers (the gRPC default is 16 MiB).
	MaxHeaderListBytes = 64 << 10
	// HandshakeTimeout bounds the TLS handshake of a new connection (the
	// default, 120 s, lets slow or idle peers hold connections open).
	HandshakeTimeout = 10 * time.Second
	// KeepaliveMinTime is the shortest ping interval a client may use
	// without being disconnected (too_many_pings). Our clients ping every
	// pkg/auth.KeepaliveTime (20 s); the gRPC default minimum, 5 minutes,
	// would make the server hang up on them.
	KeepaliveMinTime = 10 * time.Second
	// KeepaliveTime and KeepaliveTimeout: the server pings a connection
	// idle for KeepaliveTime and drops it when no answer comes within
	// KeepaliveTimeout, freeing the resources of peers that vanished
	// without closing (the lease TTL, not this, decides when their work
	// is given to someone else).
	KeepaliveTime    = 30 * time.Second
	KeepaliveTimeout = 10 * time.Second
)

// Limits are the server options above plus the message size limit
// (pkg/auth.MaxMessageBytes, shared with the clients).
func Limits() []grpc.ServerOption {
	return append(pauth.MessageSizeServerOptions(),
		grpc.MaxConcurrentStreams(MaxConcurrentStreams),
		grpc.MaxHeaderListSize(MaxHeaderListBytes),
		grpc.ConnectionTimeout(HandshakeTimeout),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: KeepaliveMinTime, PermitWithoutStream: true}),
		grpc.KeepaliveParams(keepalive.ServerParameters{Time: KeepaliveTime, Timeout: KeepaliveTimeout}),
	)
}
