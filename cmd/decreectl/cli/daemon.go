package cli

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"time"

	"github.com/decreehq/decree/controller"
	"github.com/decreehq/decree/controller/dashboard"
	"github.com/decreehq/decree/controller/metrics"
	"github.com/decreehq/decree/controller/tracing"
	"github.com/decreehq/decree/pkg/layout"
	decreev1 "github.com/decreehq/decree/proto/decree/v1"
	"github.com/decreehq/decree/worker"
	"github.com/spf13/cobra"
)

func newDaemonCmd(g *globals) *cobra.Command {
	var (
		interval string
		mcfg     metrics.ListenConfig
		web      dashboard.Config
	)
	cmd := &cobra.Command{
		Use:   "daemon [--interval 2s]",
		Short: "Serve the project until stopped: process the inbox as messages arrive and fire .decree/cron/",
		Long: `daemon runs a controller and a local worker on this project until it gets
SIGINT or SIGTERM. It processes every message that reaches the inbox (files
dropped in by hand, by other tools or by routines, and submissions of other
decreectl commands, which find the daemon on .decree/decree.sock) and fires
the scheduled messages of .decree/cron/. Routine discovery (routine-sync)
runs first.

On SIGINT or SIGTERM the attempt under way is interrupted (its routine is
stopped) and the tree is put back to where that attempt started: the next
start runs the same attempt again (an interrupted attempt does not count).
The daemon then exits 0.

--metrics-listen serves Prometheus metrics as decree-controller does (plain
HTTP on loopback; TLS and a token elsewhere), and OTEL_EXPORTER_OTLP_ENDPOINT
turns on OpenTelemetry traces (see the README, "Metrics, traces and workers
on demand").

With --http ADDR it also serves the web dashboard (see the README's
"Web dashboard"): on a loopback address plain HTTP without login; on any
other address only with --http-tls-cert, --http-tls-key and
--http-token-file (the client token people log in with).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			every, err := parseInterval(interval)
			if err != nil {
				return &exitError{code: 2, msg: err.Error()}
			}
			if mcfg.Addr != "" {
				if err := mcfg.Validate(); err != nil {
					return &exitError{code: 2, msg: err.Error()}
				}
			} else if mcfg.CertFile != "" || mcfg.KeyFile != "" || mcfg.TokenFile != "" {
				return &exitError{code: 2, msg: "--metrics-tls-cert, --metrics-tls-key and --metrics-token-file apply to --metrics-listen; add it or drop them"}
			}
			if g.controller != "" {
				return &exitError{code: 2, msg: "daemon serves the project on this machine; drop --controller (a decree-controller elsewhere is already a daemon for its project)"}
			}
			root, err := g.projectRoot()
			if err != nil {
				return err
			}
			if web.Addr == "" && (web.CertFile != "" || web.KeyFile != "" || web.TokenFile != "") {
				return &exitError{code: 2, msg: "--http-tls-cert, --http-tls-key and --http-token-file apply to the dashboard: add --http HOST:PORT, or drop them"}
			}
			if web.Addr != "" {
				if err := web.Validate(); err != nil {
					return &exitError{code: 2, msg: err.Error()}
				}
			}
			if err := g.syncAtStart(); err != nil {
				return err
			}
			return runDaemon(cmd.Context(), g, root, every, mcfg, web)
		},
	}
	cmd.Flags().StringVar(&web.Addr, "http", "", "also serve the web dashboard on HOST:PORT (loopback: plain HTTP, no login; any other address needs --http-tls-cert, --http-tls-key and --http-token-file)")
	cmd.Flags().StringVar(&web.CertFile, "http-tls-cert", "", "TLS certificate (PEM) for --http")
	cmd.Flags().StringVar(&web.KeyFile, "http-tls-key", "", "TLS private key (PEM) for --http")
	cmd.Flags().StringVar(&web.TokenFile, "http-token-file", "", "file holding the client token people log in to the dashboard with (required off loopback); must not be readable by other users")
	cmd.Flags().StringVar(&interval, "interval", "2s", "how often to look for files dropped into the inbox: a duration (2s, 500ms) or whole seconds")
	cmd.Flags().StringVar(&mcfg.Addr, "metrics-listen", "", "serve Prometheus metrics at http(s)://HOST:PORT/metrics; plain HTTP on loopback only, other addresses need --metrics-tls-cert/--metrics-tls-key and --metrics-token-file")
	cmd.Flags().StringVar(&mcfg.CertFile, "metrics-tls-cert", "", "TLS certificate (PEM) for --metrics-listen")
	cmd.Flags().StringVar(&mcfg.KeyFile, "metrics-tls-key", "", "TLS private key (PEM) for --metrics-listen")
	cmd.Flags().StringVar(&mcfg.TokenFile, "metrics-token-file", "", "file holding the bearer token scrapers must present to --metrics-listen")
	return cmd
}

// parseInterval reads --interval: a Go duration or a number of seconds (as
// DECREE_INTERVAL=2 in the Docker image).
func parseInterval(s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if err != nil {
		n, nerr := strconv.ParseFloat(s, 64)
		if nerr != nil {
			return 0, fmt.Errorf("--interval %q: write a duration such as 2s or 500ms, or a number of seconds", s)
		}
		d = time.Duration(n * float64(time.Second))
	}
	if d < 50*time.Millisecond || d > time.Hour {
		return 0, fmt.Errorf("--interval %s is out of range: use 50ms to 1h", d)
	}
	return d, nil
}

// runDaemon serves root until ctx ends, then stops the controller (which
// interrupts the attempt under way) and the worker.
func runDaemon(ctx context.Context, g *globals, root string, every time.Duration, mcfg metrics.ListenConfig, web dashboard.Config) error {
	// Unless --verbose, the daemon reports what it does (cron fires,
	// skips) at info level; the worker reports only errors.
	log, wlog := g.log, g.log.With("part", "worker")
	if !g.verbose {
		log = slog.New(slog.NewTextHandler(g.stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
		wlog = slog.New(slog.NewTextHandler(g.stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	}
	tracer, err := tracing.FromEnv(ctx, "decreectl-daemon", log)
	if err != nil {
		return err
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = tracer.Shutdown(sctx)
	}()
	c, err := controller.New(controller.Options{Root: root, Logger: log.With("part", "controller"), Poll: every, FixedWorkers: true, Daemon: true,
		Metrics: mcfg.Addr != "", Tracer: tracer})
	if err != nil {
		return err
	}
	defer c.Close()
	lis, err := controller.ListenUnix(root)
	if err != nil {
		return err
	}
	cctx, stopController := context.WithCancel(context.WithoutCancel(ctx))
	defer stopController()
	if mcfg.Addr != "" {
		ml, err := metrics.Listen(mcfg, c.MetricsHandler(), log)
		if err != nil {
			lis.Close()
			return err
		}
		fmt.Fprintf(g.stderr, "decree: metrics on %s\n", ml.URL())
		go func() {
			if err := ml.Serve(cctx); err != nil {
				log.Error("metrics listener", "err", err)
			}
		}()
	}
	served := make(chan error, 1)
	go func() { served <- c.Serve(cctx, lis) }()
	wctx, stopWorker := context.WithCancel(context.WithoutCancel(ctx))
	defer stopWorker()
	worked := make(chan error, 1)
	target := "unix://" + layout.SocketPath(root)
	go func() { worked <- worker.Run(wctx, worker.Options{Controller: target, Workspace: root, Logger: wlog}) }()
	webDone := make(chan struct{})
	close(webDone)
	if web.Addr != "" {
		conn, err := dashboard.DialProject(root)
		if err != nil {
			return err
		}
		defer conn.Close()
		dash, lis, err := dashboard.Start(web, decreev1.NewControllerServiceClient(conn), log.With("part", "dashboard"))
		if err != nil {
			return err
		}
		fmt.Fprintf(g.stderr, "decree: dashboard on %s\n", dashboard.URL(web, lis.Addr()))
		webDone = make(chan struct{})
		go func() {
			defer close(webDone)
			if err := dash.Serve(cctx, lis); err != nil {
				log.Error("dashboard stopped", "err", err)
			}
		}()
	}
	fmt.Fprintf(g.stderr, "decree: daemon serving %s (inbox every %s, cron files in .decree/cron/); stop with Ctrl-C or SIGTERM\n", root, every)
	var failed error
	select {
	case <-ctx.Done():
		fmt.Fprintln(g.stderr, "decree: stopping; an interrupted attempt is retried at the next start")
	case err := <-served:
		failed = fmt.Errorf("controller stopped: %w", err)
		served <- nil
	case err := <-worked:
		failed = fmt.Errorf("local worker stopped: %w", err)
		worked <- nil
	}
	stopController()
	<-webDone
	if err := <-served; err != nil && failed == nil {
		failed = err
	}
	stopWorker()
	<-worked
	return failed
}

// printServeStatus adds to `status` who serves the project and any wait
// for an AI tool's usage limit.
func printServeStatus(w io.Writer, st *decreev1.GetStatusResponse, now time.Time) {
	serving := "no daemon (an embedded controller for this command)"
	if st.GetDaemon() {
		serving = "a daemon (decreectl daemon or decree-controller): inbox and cron are processed as they come"
	}
	fmt.Fprintf(w, "served by   %s\n", serving)
	if u := st.GetUsageLimitWait(); u != nil {
		until := u.GetUntil().AsTime().Local()
		fmt.Fprintf(w, "waiting     usage limit reached; %s retries at %s (%s)\n", u.GetMessageId(), until.Format("15:04"), span(until.Sub(now)))
	}
}
