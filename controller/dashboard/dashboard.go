// Package dashboard is decree's web dashboard: server-rendered pages
// (html/template) of a controller's queue, messages, live logs, diffs,
// dead letters, cron files and routines, with the actions people reach for
// (submit, requeue, cancel, revert, run the pre-checks).
//
// It talks to the controller only through the controller's own gRPC API
// (decreev1.ControllerServiceClient, in process over the project's unix
// socket), so it can do nothing a client cannot.
//
// Pages work without JavaScript for reading; with it, htmx and its
// server-sent-events extension (vendored under static/, embedded, nothing
// loaded from another host) keep the overview current and append a running
// attempt's log as it grows. Large logs and diffs are read in pages through
// GetArtifact and WatchLogs: neither the dashboard nor the controller holds
// one whole.
//
// Security (see Config and security.go):
//
//   - the listener follows the gRPC listener's rules: a loopback address
//     may serve plain HTTP; any other address needs TLS (a certificate and
//     key) and the client token, and every page then needs a login with it;
//   - a login sets a session cookie (HttpOnly, SameSite=Strict, Secure under
//     TLS); every action is a POST that must carry the session's CSRF token
//     and pass net/http's cross-origin protection (Sec-Fetch-Site / Origin);
//   - on a loopback listener without login, requests must name a loopback
//     host (a DNS-rebinding page cannot reach the dashboard through its own
//     name);
//   - every response forbids framing and sets a Content-Security-Policy
//     allowing only the dashboard's own scripts and styles.
package dashboard

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"embed"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	pauth "github.com/decreehq/decree/pkg/auth"
	"github.com/decreehq/decree/pkg/layout"
	decreev1 "github.com/decreehq/decree/proto/decree/v1"
	"google.golang.org/grpc"
)

//go:embed static templates
var assets embed.FS

// Config says where and how the dashboard listens (--http and its flags).
type Config struct {
	// Addr is HOST:PORT (--http). Port 0 picks a free port.
	Addr string
	// CertFile and KeyFile turn on TLS (--http-tls-cert, --http-tls-key).
	CertFile, KeyFile string
	// TokenFile holds the client token people log in with
	// (--http-token-file). Required on a non-loopback address.
	TokenFile string
}

// TLS reports whether a certificate is configured.
func (c Config) TLS() bool { return c.CertFile != "" || c.KeyFile != "" }

// Validate checks the configuration without touching the network: the
// address, TLS and a token on any non-loopback address.
func (c Config) Validate() error {
	host, port, err := net.SplitHostPort(c.Addr)
	if err != nil {
		return fmt.Errorf("--http %q: want HOST:PORT, e.g. 127.0.0.1:8080 (%v)", c.Addr, err)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return fmt.Errorf("--http %q: the port must be a number from 0 to 65535", c.Addr)
	}
	if (c.CertFile == "") != (c.KeyFile == "") {
		return errors.New("dashboard TLS needs both --http-tls-cert and --http-tls-key")
	}
	if pauth.IsLoopbackHost(host) {
		return nil
	}
	if !c.TLS() {
		return fmt.Errorf("--http %s: refusing to serve the dashboard on a non-loopback address without TLS; pass --http-tls-cert and --http-tls-key, or use 127.0.0.1", c.Addr)
	}
	if c.TokenFile == "" {
		return fmt.Errorf("--http %s: a dashboard on a non-loopback address needs a login: pass --http-token-file with the client token (make one with `openssl rand -hex 32 > FILE && chmod 600 FILE`)", c.Addr)
	}
	return nil
}

// Options configure a Server.
type Options struct {
	// Client is the controller's API (required).
	Client decreev1.ControllerServiceClient
	// Logger receives the dashboard's log; nil discards it.
	Logger *slog.Logger
	// Token is the client token a login must present; empty serves
	// without login (loopback only, which Listen enforces).
	Token string
	// Loopback says the listener is bound to a loopback address, so
	// requests must name a loopback host (set by Listen's caller from the
	// bound address; New derives it in Serve).
	Loopback bool
	// Secure marks cookies Secure (TLS).
	Secure bool
}

// Server serves the dashboard.
type Server struct {
	c        decreev1.ControllerServiceClient
	log      *slog.Logger
	needAuth bool
	token    [sha256.Size]byte
	loopback bool
	secure   bool
	key      []byte // HMAC key for CSRF tokens
	pages    *pages
	mux      *http.ServeMux
	coop     *http.CrossOriginProtection
	hub      *hub

	loginMu sync.Mutex // serialises failed logins

	mu       sync.Mutex
	sessions map[string]time.Time // session id -> expiry
	checks   *checkResult         // last pre-check run
}

// New builds a dashboard server.
func New(opts Options) (*Server, error) {
	if opts.Client == nil {
		return nil, errors.New("dashboard: no controller client")
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	p, err := loadPages()
	if err != nil {
		return nil, err
	}
	s := &Server{c: opts.Client, log: log, loopback: opts.Loopback, secure: opts.Secure, pages: p,
		sessions: map[string]time.Time{}, key: make([]byte, 32)}
	if _, err := rand.Read(s.key); err != nil {
		return nil, err
	}
	if opts.Token != "" {
		s.needAuth, s.token = true, sha256.Sum256([]byte(opts.Token))
	}
	s.hub = newHub(s.c, log)
	s.coop = http.NewCrossOriginProtection()
	s.coop.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.log.Warn("refused a cross-origin request", "method", r.Method, "path", r.URL.Path, "origin", r.Header.Get("Origin"))
		s.fail(w, r, http.StatusForbidden, "This request came from another site and was refused. Use the dashboard's own pages to act.")
	}))
	s.routes()
	return s, nil
}

// Close stops following the controller's events (Serve does it when it
// returns).
func (s *Server) Close() { s.hub.close() }

// Handler is the dashboard's HTTP handler with every guard applied.
func (s *Server) Handler() http.Handler { return s.guard(s.mux) }

// Listen binds cfg.Addr after Validate, and refuses a plain-HTTP listener
// whose bound address is not loopback (a "localhost" resolving elsewhere).
func Listen(cfg Config) (net.Listener, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	lis, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return nil, fmt.Errorf("dashboard: listen on %s: %w", cfg.Addr, err)
	}
	if !cfg.TLS() && !IsLoopback(lis.Addr()) {
		lis.Close()
		return nil, fmt.Errorf("--http %s bound %s, which is not a loopback address; plain HTTP is allowed only on loopback", cfg.Addr, lis.Addr())
	}
	return lis, nil
}

// IsLoopback reports whether a bound address is a loopback TCP address.
func IsLoopback(a net.Addr) bool {
	ta, ok := a.(*net.TCPAddr)
	return ok && ta.IP.IsLoopback()
}

// Start validates cfg, reads its token and certificate, binds the
// listener and builds the server: what decree-controller and `decreectl
// daemon` call for --http. Serve the result with Serve.
func Start(cfg Config, client decreev1.ControllerServiceClient, log *slog.Logger) (*Server, net.Listener, error) {
	if err := cfg.Validate(); err != nil {
		return nil, nil, err
	}
	var tok string
	if cfg.TokenFile != "" {
		t, err := pauth.ReadTokenFile(cfg.TokenFile)
		if err != nil {
			return nil, nil, fmt.Errorf("--http-token-file: %w", err)
		}
		tok = t
	}
	var tlsCfg *tls.Config
	if cfg.TLS() {
		pair, err := tls.LoadX509KeyPair(cfg.CertFile, cfg.KeyFile)
		if err != nil {
			return nil, nil, fmt.Errorf("load dashboard TLS certificate %s with key %s: %w (both must be PEM, and the key must match the certificate)", cfg.CertFile, cfg.KeyFile, err)
		}
		tlsCfg = &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{pair}}
	}
	lis, err := Listen(cfg)
	if err != nil {
		return nil, nil, err
	}
	s, err := New(Options{Client: client, Logger: log, Token: tok, Loopback: IsLoopback(lis.Addr()), Secure: tlsCfg != nil})
	if err != nil {
		lis.Close()
		return nil, nil, err
	}
	if tlsCfg != nil {
		lis = tls.NewListener(lis, tlsCfg)
	}
	return s, lis, nil
}

// Serve serves HTTP on lis until ctx ends; live streams end with ctx.
func (s *Server) Serve(ctx context.Context, lis net.Listener) error {
	hs := &http.Server{
		Handler:           s.Handler(),
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       time.Minute,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		BaseContext:       func(net.Listener) context.Context { return ctx },
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
	}
	defer s.Close()
	done := make(chan error, 1)
	go func() { done <- hs.Serve(lis) }()
	select {
	case err := <-done:
		return fmt.Errorf("dashboard: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil {
		hs.Close()
	}
	<-done
	return nil
}

// DialProject connects to the controller of root over its unix socket
// (.decree/decree.sock), in the same process: the dashboard then has
// exactly a local client's rights.
func DialProject(root string) (*grpc.ClientConn, error) {
	target := "unix://" + layout.SocketPath(root)
	opts, err := pauth.DialOptions(target, pauth.ClientOptions{})
	if err != nil {
		return nil, err
	}
	conn, err := grpc.NewClient(target, opts...)
	if err != nil {
		return nil, fmt.Errorf("dashboard: connect to the controller at %s: %w", target, err)
	}
	return conn, nil
}

// URL is the address to open in a browser for a bound listener.
func URL(cfg Config, a net.Addr) string {
	scheme := "http"
	if cfg.TLS() {
		scheme = "https"
	}
	return scheme + "://" + a.String() + "/"
}
