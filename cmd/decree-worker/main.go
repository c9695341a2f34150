// Command decree-worker runs decree routines for a controller: it dials the
// controller (by default the unix socket of the project in --workspace),
// registers, and runs the routines, hooks and router calls it is given until
// it receives SIGINT or SIGTERM, when it stops the current routine
// gracefully, reports it, and exits.
//
// A controller on another machine is reached over TCP with --controller
// HOST:PORT: TLS by default (--tls-ca names the CA that signed the
// controller's certificate; --tls-cert and --tls-key give a client
// certificate when the controller requires mutual TLS), or plain text with
// --insecure, allowed only to a loopback address. TCP needs the worker token:
// --token-file, else $DECREE_TOKEN_FILE, else $DECREE_TOKEN. A unix socket
// needs neither. The connection is kept with keepalive pings and
// re-established with backoff and jitter; a refused token stops the worker
// with the controller's message.
//
// One-shot workers, for a scaler that starts a worker per unit of queued
// work (a KEDA ScaledJob, see deploy/k8s/keda): --exit-after N exits 0
// after N assignments are reported, --exit-when-idle D once no work has
// come for D. A worker that leaves (either way, or on SIGTERM) first tells
// the controller it drains, so work given to it and not started goes to
// another worker at once; work it started is reported (on SIGTERM: stopped,
// then reported).
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"google.golang.org/grpc"

	"github.com/decreehq/decree/pkg/auth"
	"github.com/decreehq/decree/pkg/memlimit"
	"github.com/decreehq/decree/worker"
)

type labelFlag []string

func (l *labelFlag) String() string     { return strings.Join(*l, ",") }
func (l *labelFlag) Set(s string) error { *l = append(*l, s); return nil }

func main() {
	memlimit.Apply()
	os.Exit(run())
}

func run() int {
	var (
		controller = flag.String("controller", os.Getenv("DECREE_CONTROLLER"), "controller address: unix:///path/.decree/decree.sock, a socket path, or host:port (env DECREE_CONTROLLER; default: the unix socket of --workspace)")
		tokenFile  = flag.String("token-file", "", "file holding the worker token, for a TCP controller (else env DECREE_TOKEN_FILE, or DECREE_TOKEN with the value); must not be readable by other users")
		tlsCA      = flag.String("tls-ca", "", "CA bundle (PEM) that signed the controller's certificate (default: the system's CAs)")
		tlsCert    = flag.String("tls-cert", "", "client certificate (PEM), when the controller requires mutual TLS")
		tlsKey     = flag.String("tls-key", "", "client certificate's key (PEM)")
		insecure   = flag.Bool("insecure", false, "plain TCP without TLS; allowed only to a loopback address")
		workspace  = flag.String("workspace", ".", "project directory to work in")
		id         = flag.String("id", "", "worker id (default: kept in <workspace>/.decree/worker-id)")
		verbose    = flag.Bool("verbose", false, "log debug details")
		exitAfter  = flag.Int("exit-after", 0, "one-shot: exit 0 after running and reporting this many assignments (0: no limit); for a Kubernetes Job per unit of work (deploy/k8s/keda)")
		exitIdle   = flag.Duration("exit-when-idle", 0, "exit 0 once no assignment has come for this long, e.g. 30s (0: never)")
		labels     labelFlag
	)
	flag.Var(&labels, "label", "label key=value (repeatable)")
	flag.Parse()
	if flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "decree-worker: unexpected arguments %q; see -help\n", flag.Args())
		return 2
	}
	if *exitAfter < 0 || *exitIdle < 0 {
		fmt.Fprintln(os.Stderr, "decree-worker: --exit-after and --exit-when-idle must not be negative (0 turns them off)")
		return 2
	}
	level := slog.LevelInfo
	if *verbose {
		level = slog.LevelDebug
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	parsed, err := worker.ParseLabels(labels)
	if err != nil {
		fmt.Fprintf(os.Stderr, "decree-worker: %v\n", err)
		return 2
	}
	var dialOpts []grpc.DialOption
	if *controller != "" && !auth.IsUnixTarget(*controller) {
		token, err := auth.ResolveToken(*tokenFile, os.Getenv)
		if err != nil {
			fmt.Fprintf(os.Stderr, "decree-worker: %v\n", err)
			return 2
		}
		dialOpts, err = auth.DialOptions(*controller, auth.ClientOptions{
			Token: token, CAFile: *tlsCA, CertFile: *tlsCert, KeyFile: *tlsKey, Insecure: *insecure,
		})
		if err != nil {
			fmt.Fprintf(os.Stderr, "decree-worker: %v\n", err)
			return 2
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// After the first signal the worker stops gracefully; a second one
	// gets the default behaviour (exit at once).
	context.AfterFunc(ctx, stop)
	err = worker.Run(ctx, worker.Options{
		Controller:   *controller,
		DialOptions:  dialOpts,
		Workspace:    *workspace,
		WorkerID:     *id,
		Labels:       parsed,
		Logger:       log,
		ExitAfter:    *exitAfter,
		ExitWhenIdle: *exitIdle,
	})
	if err != nil {
		fmt.Fprintf(os.Stderr, "decree-worker: %v\n", err)
		return 1
	}
	return 0
}
