package auth

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"sync"
	"time"

	"google.golang.org/grpc/credentials"

	pauth "github.com/decreehq/decree/pkg/auth"
)

// splitCreds are the server's transport credentials: a connection accepted
// on a unix socket passes through untouched and is marked unixInfo (the
// interceptors let it through without a token); a TCP connection gets the
// TLS handshake, or passes as plain text when tcp is nil (--insecure, bound
// to loopback only). One gRPC server thus serves both kinds of listener.
type splitCreds struct {
	tcp credentials.TransportCredentials // nil: plain text
}

// unixInfo marks a connection that arrived on a unix socket.
type unixInfo struct{ credentials.CommonAuthInfo }

func (unixInfo) AuthType() string { return "unix" }

// plainInfo marks a plain-text TCP connection.
type plainInfo struct{ credentials.CommonAuthInfo }

func (plainInfo) AuthType() string { return "insecure" }

func (c *splitCreds) ServerHandshake(conn net.Conn) (net.Conn, credentials.AuthInfo, error) {
	if conn.LocalAddr().Network() == "unix" {
		return conn, unixInfo{credentials.CommonAuthInfo{SecurityLevel: credentials.PrivacyAndIntegrity}}, nil
	}
	if c.tcp == nil {
		return conn, plainInfo{credentials.CommonAuthInfo{SecurityLevel: credentials.NoSecurity}}, nil
	}
	return c.tcp.ServerHandshake(conn)
}

func (c *splitCreds) ClientHandshake(context.Context, string, net.Conn) (net.Conn, credentials.AuthInfo, error) {
	return nil, nil, errors.New("decree controller credentials are for the server side only")
}

func (c *splitCreds) Info() credentials.ProtocolInfo {
	if c.tcp != nil {
		return c.tcp.Info()
	}
	return credentials.ProtocolInfo{SecurityProtocol: "insecure"}
}

func (c *splitCreds) Clone() credentials.TransportCredentials {
	cp := &splitCreds{}
	if c.tcp != nil {
		cp.tcp = c.tcp.Clone()
	}
	return cp
}

//nolint:staticcheck // part of the interface; servers do not use it.
func (c *splitCreds) OverrideServerName(string) error { return nil }

// serverTLS builds the TLS configuration: TLS 1.2 or newer, the key pair
// re-read when its files change, and with a client CA, client certificates
// required and verified.
func serverTLS(cfg Config, log *slog.Logger) (*tls.Config, error) {
	kp := &keyPair{certFile: cfg.CertFile, keyFile: cfg.KeyFile, log: log}
	if err := kp.load(); err != nil {
		return nil, err
	}
	t := &tls.Config{
		MinVersion:     tls.VersionTLS12,
		GetCertificate: kp.get,
	}
	if cfg.ClientCAFile != "" {
		pool, err := pauth.LoadCertPool(cfg.ClientCAFile)
		if err != nil {
			return nil, fmt.Errorf("--tls-client-ca: %w", err)
		}
		t.ClientCAs = pool
		t.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return t, nil
}

// keyPair serves a certificate and reloads it when either file's
// modification time or size changes. A reload that fails (a half-written
// renewal) keeps the previous pair and is logged.
type keyPair struct {
	certFile, keyFile string
	log               *slog.Logger

	mu    sync.Mutex
	cert  *tls.Certificate
	stamp [2]fileStamp
}

type fileStamp struct {
	mod  time.Time
	size int64
}

func stampOf(path string) (fileStamp, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return fileStamp{}, err
	}
	return fileStamp{fi.ModTime(), fi.Size()}, nil
}

func (k *keyPair) load() error {
	cs, err := stampOf(k.certFile)
	if err != nil {
		return fmt.Errorf("--tls-cert: %w", err)
	}
	ks, err := stampOf(k.keyFile)
	if err != nil {
		return fmt.Errorf("--tls-key: %w", err)
	}
	pair, err := tls.LoadX509KeyPair(k.certFile, k.keyFile)
	if err != nil {
		return fmt.Errorf("load TLS certificate %s with key %s: %w (both must be PEM, and the key must match the certificate)", k.certFile, k.keyFile, err)
	}
	k.mu.Lock()
	k.cert, k.stamp = &pair, [2]fileStamp{cs, ks}
	k.mu.Unlock()
	return nil
}

func (k *keyPair) get(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	cs, err1 := stampOf(k.certFile)
	ks, err2 := stampOf(k.keyFile)
	k.mu.Lock()
	changed := err1 == nil && err2 == nil && [2]fileStamp{cs, ks} != k.stamp
	cert := k.cert
	k.mu.Unlock()
	if changed {
		if err := k.load(); err != nil {
			// Remember the stamps anyway, so a broken pair is reported
			// once, not on every handshake, until the files change again.
			k.mu.Lock()
			k.stamp = [2]fileStamp{cs, ks}
			k.mu.Unlock()
			k.log.Warn("could not reload the TLS certificate; still serving the previous one", "err", err)
		} else {
			k.log.Info("reloaded the TLS certificate", "cert", k.certFile)
			k.mu.Lock()
			cert = k.cert
			k.mu.Unlock()
		}
	}
	return cert, nil
}
