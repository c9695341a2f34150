// Command decree-controller serves one decree project: it owns the
// project's inbox, chains, checkpoints and retry state, and waits for
// workers (decree-worker) and clients (decreectl) on the project's unix
// socket, .decree/decree.sock (mode 0600, no token), and, with --listen, on
// TCP too: TLS (--tls-cert, --tls-key, and --tls-client-ca for mutual TLS)
// or, on a loopback address only, plain text with --insecure; every TCP call
// carries a bearer token, the client token (--client-token-file) for
// ControllerService, the worker token (--worker-token-file) for
// WorkerService. See controller/auth for the rules and deploy/README.md for
// a set-up with workers on other machines.
//
// It is a daemon for its project: it processes messages as they reach the
// inbox and fires the scheduled messages of .decree/cron/. Routine discovery
// (routine-sync) runs at start.
//
// With --http ADDR it also serves the web dashboard (controller/dashboard):
// plain HTTP without login on a loopback address; any other address needs
// --http-tls-cert, --http-tls-key and --http-token-file (the client token
// people log in with).
//
// Once serving, it prints one line per listener on standard output,
// "listening on ADDRESS" (the unix socket's path, then each TCP address as
// bound, so --listen 127.0.0.1:0 reveals its port), and with
// --metrics-listen, "metrics on URL" (controller/metrics lists the rules),
// then with --http "dashboard on URL".
//
// With OTEL_EXPORTER_OTLP_ENDPOINT set it exports OpenTelemetry traces over
// OTLP/gRPC, one per message, and gives every routine its attempt's
// TRACEPARENT (see controller/tracing).
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/decreehq/decree/controller"
	"github.com/decreehq/decree/controller/auth"
	"github.com/decreehq/decree/controller/dashboard"
	"github.com/decreehq/decree/controller/diskspace"
	"github.com/decreehq/decree/controller/lease"
	"github.com/decreehq/decree/controller/metrics"
	"github.com/decreehq/decree/controller/tracing"
	"github.com/decreehq/decree/pkg/memlimit"
	"github.com/decreehq/decree/pkg/routine"
	decreev1 "github.com/decreehq/decree/proto/decree/v1"
)

// Lease TTL bounds: below a second, heartbeats (a third of the TTL) would
// flood the controller; above ten minutes a lost worker holds up the chain
// for too long.
const (
	minLeaseTTL = time.Second
	maxLeaseTTL = 10 * time.Minute
)

type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(s string) error { *l = append(*l, s); return nil }

func main() {
	memlimit.Apply()
	os.Exit(run())
}

func run() int {
	var (
		listen   listFlag
		tcp      auth.Config
		project  = flag.String("project", ".", "project directory (the one holding .decree/)")
		leaseTTL = flag.Duration("lease-ttl", 10*time.Second, "how long a worker's lease lives without a heartbeat; a worker silent this long loses its attempt (\"worker lost\") and the retry rules go on")
		verbose  = flag.Bool("verbose", false, "log debug detail")
		minFree  = flag.Uint64("min-free-bytes", diskspace.DefaultMinFree, "pause processing while less than this many bytes are free on the project's disk (logged, a warning event, shown by `decreectl status`); it resumes by itself once space is freed")
		forget   = flag.Duration("forget-workers-after", lease.DefaultForgetAfter, "how long a worker that stopped heartbeating (and holds no lease) stays registered and listed by `decreectl workers`")
	)
	flag.Var(&listen, "listen", "also serve TCP on HOST:PORT (repeatable); needs TLS, or --insecure on loopback, and tokens")
	flag.StringVar(&tcp.CertFile, "tls-cert", "", "TLS certificate (PEM) for --listen; re-read when the file changes")
	flag.StringVar(&tcp.KeyFile, "tls-key", "", "TLS private key (PEM) for --listen")
	flag.StringVar(&tcp.ClientCAFile, "tls-client-ca", "", "CA bundle (PEM) for mutual TLS: TCP clients must present a certificate it signed")
	flag.StringVar(&tcp.ClientTokenFile, "client-token-file", "", "file holding the token decreectl presents on TCP (ControllerService); must not be readable by other users")
	flag.StringVar(&tcp.WorkerTokenFile, "worker-token-file", "", "file holding the token decree-worker presents on TCP (WorkerService); must not be readable by other users")
	flag.BoolVar(&tcp.Insecure, "insecure", false, "allow --listen without TLS, on a loopback address only (tokens are still required)")
	var mcfg metrics.ListenConfig
	flag.StringVar(&mcfg.Addr, "metrics-listen", "", "serve Prometheus metrics at http(s)://HOST:PORT/metrics; plain HTTP on a loopback address, any other address needs --metrics-tls-cert/--metrics-tls-key and --metrics-token-file")
	flag.StringVar(&mcfg.CertFile, "metrics-tls-cert", "", "TLS certificate (PEM) for --metrics-listen (default: --tls-cert)")
	flag.StringVar(&mcfg.KeyFile, "metrics-tls-key", "", "TLS private key (PEM) for --metrics-listen (default: --tls-key)")
	flag.StringVar(&mcfg.TokenFile, "metrics-token-file", "", "file holding the bearer token scrapers must present to --metrics-listen; must not be readable by other users")
	var web dashboard.Config
	flag.StringVar(&web.Addr, "http", "", "also serve the web dashboard on HOST:PORT (loopback: plain HTTP, no login; any other address needs --http-tls-cert, --http-tls-key and --http-token-file)")
	flag.StringVar(&web.CertFile, "http-tls-cert", "", "TLS certificate (PEM) for --http")
	flag.StringVar(&web.KeyFile, "http-tls-key", "", "TLS private key (PEM) for --http")
	flag.StringVar(&web.TokenFile, "http-token-file", "", "file holding the client token people log in to the dashboard with (required off loopback, optional on it); must not be readable by other users")
	flag.Parse()
	if flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "decree-controller: unexpected arguments %q; see -help\n", flag.Args())
		return 2
	}
	tcp.Listen = listen
	if err := checkLeaseTTL(*leaseTTL); err != nil {
		fmt.Fprintln(os.Stderr, "decree-controller:", err)
		return 2
	}
	if err := tcp.Validate(); err != nil {
		fmt.Fprintln(os.Stderr, "decree-controller:", err)
		return 2
	}
	if mcfg.Addr != "" {
		if mcfg.CertFile == "" && mcfg.KeyFile == "" {
			mcfg.CertFile, mcfg.KeyFile = tcp.CertFile, tcp.KeyFile
		}
		if err := mcfg.Validate(); err != nil {
			fmt.Fprintln(os.Stderr, "decree-controller:", err)
			return 2
		}
	} else if mcfg.CertFile != "" || mcfg.KeyFile != "" || mcfg.TokenFile != "" {
		fmt.Fprintln(os.Stderr, "decree-controller: --metrics-tls-cert, --metrics-tls-key and --metrics-token-file apply to --metrics-listen; add it or drop them")
		return 2
	}
	if err := checkWeb(web); err != nil {
		fmt.Fprintln(os.Stderr, "decree-controller:", err)
		return 2
	}
	level := slog.LevelInfo
	if *verbose {
		level = slog.LevelDebug
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	if *forget < *leaseTTL {
		fmt.Fprintf(os.Stderr, "decree-controller: --forget-workers-after %s is shorter than --lease-ttl %s; use at least the lease TTL\n", *forget, *leaseTTL)
		return 2
	}
	if err := serve(controller.Options{Root: *project, Logger: log, LeaseTTL: *leaseTTL, ForgetWorkersAfter: *forget, MinFreeBytes: *minFree, Metrics: mcfg.Addr != ""}, tcp, mcfg, web); err != nil {
		fmt.Fprintln(os.Stderr, "decree-controller:", err)
		return 1
	}
	return 0
}

func checkLeaseTTL(d time.Duration) error {
	if d < minLeaseTTL || d > maxLeaseTTL {
		return fmt.Errorf("--lease-ttl %s is out of range: use %s to %s (default 10s)", d, minLeaseTTL, maxLeaseTTL)
	}
	return nil
}

// checkWeb validates the dashboard flags (none of them without --http).
func checkWeb(web dashboard.Config) error {
	if web.Addr == "" {
		if web.CertFile != "" || web.KeyFile != "" || web.TokenFile != "" {
			return fmt.Errorf("--http-tls-cert, --http-tls-key and --http-token-file apply to the dashboard: add --http HOST:PORT, or drop them")
		}
		return nil
	}
	return web.Validate()
}

func serve(copts controller.Options, tcp auth.Config, mcfg metrics.ListenConfig, web dashboard.Config) error {
	log := copts.Logger
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	opts := auth.Limits()
	var guard *auth.Guard
	if len(tcp.Listen) > 0 {
		g, err := auth.New(tcp, log)
		if err != nil {
			return err
		}
		guard = g
		opts = append(opts, g.ServerOptions()...)
	}
	rep, err := routine.SyncProject(copts.Root)
	if err != nil {
		return fmt.Errorf("routine discovery: %w", err)
	}
	if rep.Changed() {
		log.Info("routine-sync", "added", rep.Added, "added_shared", rep.AddedShared, "deprecated", rep.Deprecated, "restored", rep.Restored)
	}
	copts.ServerOptions = opts
	copts.Daemon = true
	tracer, err := tracing.FromEnv(ctx, "decree-controller", log)
	if err != nil {
		return err
	}
	if tracer != nil {
		log.Info("OpenTelemetry traces on", "endpoint", os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT")+os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"))
		defer func() {
			sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if err := tracer.Shutdown(sctx); err != nil {
				log.Warn("OpenTelemetry: flushing the last spans failed", "err", err)
			}
		}()
		copts.Tracer = tracer
	}
	c, err := controller.New(copts)
	if err != nil {
		return err
	}
	defer c.Close()
	lis, err := listeners(c.Store().Root(), guard)
	if err != nil {
		return err
	}
	var dash *dashboard.Server
	var webLis net.Listener
	if web.Addr != "" {
		conn, err := dashboard.DialProject(c.Store().Root())
		if err != nil {
			return err
		}
		defer conn.Close()
		dash, webLis, err = dashboard.Start(web, decreev1.NewControllerServiceClient(conn), log.With("part", "dashboard"))
		if err != nil {
			for _, l := range lis {
				l.Close()
			}
			return err
		}
	}
	for _, l := range lis {
		fmt.Printf("listening on %s\n", l.Addr())
	}
	if mcfg.Addr != "" {
		ml, err := metrics.Listen(mcfg, c.MetricsHandler(), log)
		if err != nil {
			for _, l := range lis {
				l.Close()
			}
			return err
		}
		fmt.Printf("metrics on %s\n", ml.URL())
		go func() {
			if err := ml.Serve(ctx); err != nil {
				log.Error("metrics listener", "err", err)
			}
		}()
	}
	if dash != nil {
		fmt.Printf("dashboard on %s\n", dashboard.URL(web, webLis.Addr()))
		go func() {
			if err := dash.Serve(ctx, webLis); err != nil {
				log.Error("dashboard stopped", "err", err)
			}
		}()
	}
	log.Info("serving", "project", c.Store().Root(), "listeners", len(lis), "lease_ttl", copts.LeaseTTL)
	return c.Serve(ctx, lis...)
}

// listeners opens the unix socket and, with a guard, the TCP listeners.
func listeners(root string, guard *auth.Guard) ([]net.Listener, error) {
	unix, err := controller.ListenUnix(root)
	if err != nil {
		return nil, err
	}
	if guard == nil {
		return []net.Listener{unix}, nil
	}
	tcp, err := guard.Listen()
	if err != nil {
		unix.Close()
		return nil, err
	}
	return append([]net.Listener{unix}, tcp...), nil
}
