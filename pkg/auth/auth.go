// Package auth is what both ends of a decree TCP connection agree on: bearer
// tokens (how they are read from files that other users cannot read, and the
// metadata that carries them) and the client side of the connection (TLS
// with a CA, an optional client certificate for mutual TLS, or plain text to
// a loopback address with an explicit insecure flag, plus the per-RPC token).
//
// The controller's unix socket (.decree/decree.sock, mode 0600) needs none of
// this: DialOptions gives a unix target plain credentials and no token. Every
// TCP connection carries a token; the controller's side of the check lives in
// controller/auth.
package auth

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"
)

// MetadataKey is the gRPC metadata key carrying "Bearer <token>".
const MetadataKey = "authorization"

// BearerPrefix starts the MetadataKey value.
const BearerPrefix = "Bearer "

// Environment variables read by ResolveToken.
const (
	EnvToken     = "DECREE_TOKEN"
	EnvTokenFile = "DECREE_TOKEN_FILE"
)

// MaxMessageBytes bounds one gRPC message in either direction, on both
// ends. Bulk data (logs, file contents) travels in chunks far below this; the
// largest single messages are a workspace manifest (one entry per file of
// the project: about 150 bytes each, so 64 MiB covers trees of several
// hundred thousand files) and an attempt's result. The gRPC default of 4 MiB
// would refuse the manifest of a 30,000-file tree.
//
// Every decree server and client uses this one limit, on TCP and on the
// unix socket alike, through MessageSizeDialOption and
// MessageSizeServerOptions: a limit that differs between the two ends or
// the two transports makes a large message work on one path and fail on
// another.
const MaxMessageBytes = 64 << 20

// MaxBodyBytes is the largest message body decree accepts (63 MiB): the
// message size limit less room for a request's other fields, so that a
// body that fits SubmitMessage fits every other path too. Streamed
// submissions (SubmitMessageStream) are held to the same limit.
const MaxBodyBytes = MaxMessageBytes - 1<<20

// MessageSizeDialOption applies MaxMessageBytes to every call of a client
// connection, both directions.
func MessageSizeDialOption() grpc.DialOption {
	return grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(MaxMessageBytes), grpc.MaxCallSendMsgSize(MaxMessageBytes))
}

// MessageSizeServerOptions apply MaxMessageBytes to a server, both
// directions.
func MessageSizeServerOptions() []grpc.ServerOption {
	return []grpc.ServerOption{grpc.MaxRecvMsgSize(MaxMessageBytes), grpc.MaxSendMsgSize(MaxMessageBytes)}
}

// Keepalive: a client pings an idle connection every KeepaliveTime and drops
// it when no answer comes within KeepaliveTimeout, so a worker behind a NAT
// or a cut cable notices a dead connection in well under a minute (instead
// of the kernel's TCP timeout, hours) and reconnects. The controller's
// enforcement policy (controller/auth) must allow pings this frequent.
const (
	KeepaliveTime    = 20 * time.Second
	KeepaliveTimeout = 10 * time.Second
)

// ClientOptions say how to reach a controller over TCP. They are ignored for
// a unix socket target.
type ClientOptions struct {
	// Token is the bearer token (see ResolveToken). Required for TCP.
	Token string
	// CAFile is a PEM bundle of CAs that sign the controller's certificate;
	// empty means the system roots.
	CAFile string
	// CertFile and KeyFile are a client certificate for mutual TLS.
	CertFile, KeyFile string
	// ServerName overrides the name checked in the controller's certificate
	// (default: the host of the target).
	ServerName string
	// Insecure sends plain text; allowed only to a loopback address.
	Insecure bool
}

// IsUnixTarget reports whether a controller address names a unix socket
// ("unix:///path", "unix:path" or an absolute path).
func IsUnixTarget(target string) bool {
	return strings.HasPrefix(target, "unix:") || strings.HasPrefix(target, "unix-abstract:") || strings.HasPrefix(target, "/")
}

// IsLoopbackHost reports whether host (no port) is certainly a loopback
// address: "localhost" or an IP in 127.0.0.0/8 or ::1. Other names are not
// resolved, so they count as not loopback.
func IsLoopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(strings.Trim(host, "[]"))
	return ip != nil && ip.IsLoopback()
}

// targetHost extracts the host from a TCP target: "host:port",
// "dns:///host:port" or "dns://authority/host:port".
func targetHost(target string) (string, error) {
	addr := target
	if rest, ok := strings.CutPrefix(addr, "dns:"); ok {
		addr = strings.TrimPrefix(rest, "//")
		if i := strings.IndexByte(addr, '/'); i >= 0 {
			addr = addr[i+1:]
		}
	} else if rest, ok := strings.CutPrefix(addr, "passthrough:"); ok {
		addr = strings.TrimLeft(rest, "/")
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("controller address %q: want HOST:PORT for TCP, or unix:///path/.decree/decree.sock: %v", target, err)
	}
	return host, nil
}

// DialOptions returns the gRPC dial options for target: for a unix socket,
// plain credentials and no token; for TCP, TLS (or plain text to a loopback
// address when o.Insecure), the bearer token on every call, keepalive and
// the message size limit. It refuses a TCP target without a token, and
// Insecure to an address that is not loopback.
func DialOptions(target string, o ClientOptions) ([]grpc.DialOption, error) {
	common := []grpc.DialOption{MessageSizeDialOption()}
	if IsUnixTarget(target) {
		return append(common, grpc.WithTransportCredentials(insecure.NewCredentials())), nil
	}
	host, err := targetHost(target)
	if err != nil {
		return nil, err
	}
	if o.Token == "" {
		return nil, fmt.Errorf("controller %s is reached over TCP, which needs a token: pass --token-file FILE, or set %s (a file) or %s (the value)", target, EnvTokenFile, EnvToken)
	}
	if err := CheckToken(o.Token); err != nil {
		return nil, err
	}
	var creds credentials.TransportCredentials
	if o.Insecure {
		if o.CAFile != "" || o.CertFile != "" || o.KeyFile != "" {
			return nil, errors.New("--insecure turns TLS off, so --tls-ca, --tls-cert and --tls-key cannot go with it: drop one or the other")
		}
		if !IsLoopbackHost(host) {
			return nil, fmt.Errorf("--insecure would send the token in clear text to %s; it is allowed only to a loopback address (127.0.0.1, ::1, localhost): use TLS (--tls-ca) instead", target)
		}
		creds = insecure.NewCredentials()
	} else {
		cfg, err := clientTLS(o)
		if err != nil {
			return nil, err
		}
		creds = credentials.NewTLS(cfg)
	}
	return append(common,
		grpc.WithTransportCredentials(creds),
		grpc.WithPerRPCCredentials(TokenCredentials{Token: o.Token, AllowInsecure: o.Insecure}),
		grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: KeepaliveTime, Timeout: KeepaliveTimeout, PermitWithoutStream: true}),
	), nil
}

func clientTLS(o ClientOptions) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: o.ServerName}
	if o.CAFile != "" {
		pool, err := LoadCertPool(o.CAFile)
		if err != nil {
			return nil, err
		}
		cfg.RootCAs = pool
	}
	if (o.CertFile == "") != (o.KeyFile == "") {
		return nil, errors.New("a client certificate needs both --tls-cert and --tls-key")
	}
	if o.CertFile != "" {
		pair, err := tls.LoadX509KeyPair(o.CertFile, o.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("load client certificate %s with key %s: %w", o.CertFile, o.KeyFile, err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return cfg, nil
}

// LoadCertPool reads a PEM bundle of CA certificates.
func LoadCertPool(path string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read CA bundle: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("CA bundle %s holds no PEM certificate (want a file starting with -----BEGIN CERTIFICATE-----)", path)
	}
	return pool, nil
}

// TokenCredentials sends "authorization: Bearer <Token>" with every call.
type TokenCredentials struct {
	Token string
	// AllowInsecure lets the token travel without TLS (--insecure, which
	// DialOptions allows only to loopback).
	AllowInsecure bool
}

// GetRequestMetadata implements credentials.PerRPCCredentials.
func (c TokenCredentials) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{MetadataKey: BearerPrefix + c.Token}, nil
}

// RequireTransportSecurity implements credentials.PerRPCCredentials.
func (c TokenCredentials) RequireTransportSecurity() bool { return !c.AllowInsecure }
