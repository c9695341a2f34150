package metrics

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/decreehq/decree/controller/auth"
	pauth "github.com/decreehq/decree/pkg/auth"
)

// ListenConfig is the metrics listener of decree-controller
// (--metrics-listen and its TLS and token flags).
//
// Rules, like the gRPC listener's: a loopback address may serve plain
// HTTP, with or without a token (Prometheus or a sidecar on the same
// host); any other address needs TLS and a bearer token, so the queue's
// shape is never shown to the network unauthenticated. Token files other
// users can read are refused; tokens are compared in constant time.
type ListenConfig struct {
	// Addr is HOST:PORT.
	Addr string
	// CertFile and KeyFile turn on TLS.
	CertFile, KeyFile string
	// TokenFile holds the bearer token scrapers present.
	TokenFile string
}

// Validate checks the configuration without touching the network.
func (c ListenConfig) Validate() error {
	host, port, err := net.SplitHostPort(c.Addr)
	if err != nil {
		return fmt.Errorf("--metrics-listen %q: want HOST:PORT, e.g. 127.0.0.1:9464 (%v)", c.Addr, err)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return fmt.Errorf("--metrics-listen %q: the port must be a number from 0 to 65535", c.Addr)
	}
	if (c.CertFile == "") != (c.KeyFile == "") {
		return errors.New("metrics TLS needs both --metrics-tls-cert and --metrics-tls-key")
	}
	if pauth.IsLoopbackHost(host) {
		return nil
	}
	if c.CertFile == "" || c.TokenFile == "" {
		return fmt.Errorf("--metrics-listen %s: an address other than loopback needs TLS (--metrics-tls-cert, --metrics-tls-key) and a token (--metrics-token-file); use 127.0.0.1:PORT to serve plain HTTP on this host only", c.Addr)
	}
	return nil
}

// Listener is a bound metrics listener.
type Listener struct {
	lis   net.Listener
	srv   *http.Server
	tls   bool
	token *[sha256.Size]byte
}

// Listen validates cfg, loads its files and binds the address. Without TLS
// the bound address must be loopback (a "localhost" that resolves
// elsewhere is refused).
func Listen(cfg ListenConfig, h http.Handler, log *slog.Logger) (*Listener, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	l := &Listener{}
	if cfg.TokenFile != "" {
		tok, err := pauth.ReadTokenFile(cfg.TokenFile)
		if err != nil {
			return nil, fmt.Errorf("--metrics-token-file: %w", err)
		}
		sum := sha256.Sum256([]byte(tok))
		l.token = &sum
	}
	var tcfg *tls.Config
	if cfg.CertFile != "" {
		t, err := auth.ServerTLS(cfg.CertFile, cfg.KeyFile, log)
		if err != nil {
			return nil, fmt.Errorf("metrics listener: %w", err)
		}
		tcfg, l.tls = t, true
	}
	lis, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return nil, fmt.Errorf("--metrics-listen %s: %w", cfg.Addr, err)
	}
	if ta, ok := lis.Addr().(*net.TCPAddr); !l.tls && (!ok || !ta.IP.IsLoopback()) {
		lis.Close()
		return nil, fmt.Errorf("--metrics-listen %s bound %s, which is not a loopback address; plain HTTP is allowed only on loopback", cfg.Addr, lis.Addr())
	}
	if tcfg != nil {
		lis = tls.NewListener(lis, tcfg)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", l.guard(h))
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "decree metrics are at /metrics", http.StatusNotFound)
	})
	l.lis = lis
	l.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
	return l, nil
}

// URL is the address to scrape.
func (l *Listener) URL() string {
	scheme := "http"
	if l.tls {
		scheme = "https"
	}
	return scheme + "://" + l.lis.Addr().String() + "/metrics"
}

// Serve serves until ctx ends.
func (l *Listener) Serve(ctx context.Context) error {
	stop := context.AfterFunc(ctx, func() {
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = l.srv.Shutdown(sctx)
	})
	defer stop()
	if err := l.srv.Serve(l.lis); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("metrics listener %s: %w", l.lis.Addr(), err)
	}
	return nil
}

func (l *Listener) guard(h http.Handler) http.Handler {
	if l.token == nil {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		sum := sha256.Sum256([]byte(strings.TrimSpace(got)))
		if !ok || subtle.ConstantTimeCompare(sum[:], l.token[:]) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="decree-metrics"`)
			http.Error(w, "missing or wrong bearer token: send the content of --metrics-token-file as \"Authorization: Bearer TOKEN\"", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	})
}
