// Package auth guards a controller's TCP listeners. The unix socket
// (.decree/decree.sock, mode 0600) is left alone: the file mode is its
// guard, and connections arriving on it need neither TLS nor a token.
//
// Rules for TCP, checked before anything is bound:
//
//   - a listener needs TLS (a certificate and key), or --insecure, which is
//     allowed only on a loopback address; a listener on any other address
//     without TLS is refused;
//   - with a client CA, TLS is mutual: a client without a certificate signed
//     by it cannot even complete the handshake;
//   - every call carries a bearer token ("authorization: Bearer <token>"),
//     also with --insecure and with mutual TLS. There are two roles: the
//     client token may call ControllerService only, the worker token
//     WorkerService only. No token or an unknown token is Unauthenticated;
//     a known token calling the other role's service is PermissionDenied.
//     Tokens are compared in constant time (over their SHA-256, so not even
//     their length leaks), and token files that other users can read are
//     refused;
//   - the gRPC health service answers without a token (load balancers and
//     probes); the reflection service (grpcurl's `list` and `describe`)
//     needs either token: it reveals only the public API, but there is no
//     reason to show it to strangers.
//
// Tokens and the client CA are read once at start; rotating them means a
// restart. The certificate and key are re-read when their files change, so
// a renewed certificate (cert-manager, certbot) is picked up by new
// connections without a restart.
package auth

import (
	"crypto/sha256"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	pauth "github.com/decreehq/decree/pkg/auth"
)

// Config is the TCP side of a controller, as given on its command line.
type Config struct {
	// Listen are HOST:PORT addresses (--listen, repeatable).
	Listen []string
	// CertFile and KeyFile are the server certificate (--tls-cert, --tls-key).
	CertFile, KeyFile string
	// ClientCAFile turns on mutual TLS (--tls-client-ca).
	ClientCAFile string
	// ClientTokenFile and WorkerTokenFile hold the two roles' tokens
	// (--client-token-file, --worker-token-file). At least one is needed;
	// a role without a token cannot use TCP at all.
	ClientTokenFile, WorkerTokenFile string
	// Insecure allows plain TCP on loopback addresses (--insecure).
	Insecure bool
}

// TLS reports whether the configuration has a server certificate.
func (c Config) TLS() bool { return c.CertFile != "" || c.KeyFile != "" }

// Validate checks the configuration without touching the network or the
// files: address syntax, loopback-only plain text, and flag combinations.
func (c Config) Validate() error {
	if len(c.Listen) == 0 {
		if c.TLS() || c.ClientCAFile != "" || c.ClientTokenFile != "" || c.WorkerTokenFile != "" || c.Insecure {
			return errors.New("--tls-cert, --tls-key, --tls-client-ca, --client-token-file, --worker-token-file and --insecure apply to a TCP listener: add --listen HOST:PORT, or drop them to serve only the unix socket")
		}
		return nil
	}
	if (c.CertFile == "") != (c.KeyFile == "") {
		return errors.New("TLS needs both --tls-cert and --tls-key")
	}
	if c.Insecure && c.TLS() {
		return errors.New("--insecure turns TLS off, so it cannot go with --tls-cert and --tls-key: drop one or the other")
	}
	if c.ClientCAFile != "" && !c.TLS() {
		return errors.New("--tls-client-ca (mutual TLS) needs a server certificate: add --tls-cert and --tls-key")
	}
	if c.ClientTokenFile == "" && c.WorkerTokenFile == "" {
		return errors.New("a TCP listener needs tokens: pass --client-token-file (for decreectl) and/or --worker-token-file (for decree-worker); make one with `openssl rand -hex 32 > FILE && chmod 600 FILE`")
	}
	if c.ClientTokenFile != "" && c.ClientTokenFile == c.WorkerTokenFile {
		return errors.New("--client-token-file and --worker-token-file name the same file; the two roles need different tokens")
	}
	for _, addr := range c.Listen {
		if err := CheckListen(addr, c.TLS(), c.Insecure); err != nil {
			return err
		}
	}
	return nil
}

// CheckListen checks one --listen address: HOST:PORT with a numeric port;
// without TLS, only a loopback host with insecure. An empty host means every
// interface and so is not loopback; host names other than "localhost" are
// not resolved and count as not loopback.
func CheckListen(addr string, tlsOn, insecure bool) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("--listen %q: want HOST:PORT, e.g. 0.0.0.0:7443 or 127.0.0.1:7443 (%v)", addr, err)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return fmt.Errorf("--listen %q: the port must be a number from 0 to 65535", addr)
	}
	if tlsOn {
		return nil
	}
	loop := pauth.IsLoopbackHost(host)
	switch {
	case !loop && insecure:
		return fmt.Errorf("--listen %s: --insecure allows plain TCP only on a loopback address (127.0.0.1, ::1 or localhost); for any other address use --tls-cert and --tls-key", addr)
	case !loop:
		return fmt.Errorf("--listen %s: refusing to listen on a non-loopback address without TLS; pass --tls-cert and --tls-key (see deploy/README.md for a test CA made with openssl)", addr)
	case !insecure:
		return fmt.Errorf("--listen %s: plain TCP needs an explicit --insecure (allowed on loopback only), or pass --tls-cert and --tls-key", addr)
	}
	return nil
}

// Role is what a token may do.
type Role int

// Roles.
const (
	RoleNone   Role = iota // no valid token
	RoleClient             // ControllerService
	RoleWorker             // WorkerService
)

func (r Role) String() string {
	switch r {
	case RoleClient:
		return "client"
	case RoleWorker:
		return "worker"
	}
	return "none"
}

// Guard holds the loaded TLS material and tokens.
type Guard struct {
	cfg    Config
	log    *slog.Logger
	tls    *tls.Config // nil with Insecure
	client [sha256.Size]byte
	worker [sha256.Size]byte
	hasCl  bool
	hasWk  bool
	calls  *callLimiter
}

// New validates cfg and loads its files: the certificate and key, the
// client CA, and the token files (refusing files other users can read).
func New(cfg Config, log *slog.Logger) (*Guard, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if len(cfg.Listen) == 0 {
		return nil, errors.New("auth: no --listen address; the unix socket needs no guard")
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	g := &Guard{cfg: cfg, log: log, calls: newCallLimiter(MaxCallsPerHost)}
	if cfg.ClientTokenFile != "" {
		tok, err := pauth.ReadTokenFile(cfg.ClientTokenFile)
		if err != nil {
			return nil, fmt.Errorf("--client-token-file: %w", err)
		}
		g.client, g.hasCl = sha256.Sum256([]byte(tok)), true
	}
	if cfg.WorkerTokenFile != "" {
		tok, err := pauth.ReadTokenFile(cfg.WorkerTokenFile)
		if err != nil {
			return nil, fmt.Errorf("--worker-token-file: %w", err)
		}
		g.worker, g.hasWk = sha256.Sum256([]byte(tok)), true
	}
	if g.hasCl && g.hasWk && g.client == g.worker {
		return nil, errors.New("--client-token-file and --worker-token-file hold the same token; the two roles need different tokens, or a worker could act as a client")
	}
	if cfg.TLS() {
		t, err := serverTLS(cfg, log)
		if err != nil {
			return nil, err
		}
		g.tls = t
	}
	return g, nil
}

// ServerOptions are the gRPC server options that apply the guard:
// transport credentials (TLS on TCP connections, nothing on the unix
// socket), the token check on a stream's headers before its body is read
// (InTapHandle) and the same check in interceptors. Add Limits separately.
func (g *Guard) ServerOptions() []grpc.ServerOption {
	var tcp credentials.TransportCredentials
	if g.tls != nil {
		tcp = credentials.NewTLS(g.tls)
	}
	return []grpc.ServerOption{
		grpc.Creds(&splitCreds{tcp: tcp}),
		grpc.InTapHandle(g.tap),
		grpc.ChainUnaryInterceptor(g.unary),
		grpc.ChainStreamInterceptor(g.stream),
	}
}

// Listen binds every --listen address, each limited to MaxConnsPerHost
// connections per remote address and MaxConns in all. With Insecure it
// checks that the bound address really is loopback (a "localhost" that resolves elsewhere
// is closed and refused).
func (g *Guard) Listen() ([]net.Listener, error) {
	var out []net.Listener
	fail := func(err error) ([]net.Listener, error) {
		for _, l := range out {
			l.Close()
		}
		return nil, err
	}
	for _, addr := range g.cfg.Listen {
		lis, err := net.Listen("tcp", addr)
		if err != nil {
			return fail(fmt.Errorf("listen on %s: %w", addr, err))
		}
		out = append(out, newLimitListener(lis, MaxConnsPerHost, MaxConns, g.log))
		if g.tls == nil {
			if ta, ok := lis.Addr().(*net.TCPAddr); !ok || !ta.IP.IsLoopback() {
				return fail(fmt.Errorf("--listen %s bound %s, which is not a loopback address; plain TCP (--insecure) is allowed only on loopback", addr, lis.Addr()))
			}
		}
	}
	return out, nil
}
