// Command decree-worker runs decree routines for a controller: it dials the
// controller (by default the unix socket of the project in --workspace),
// registers, and runs the routines, hooks and router calls it is given until
// it receives SIGINT or SIGTERM, when it stops the current routine
// gracefully, reports it, and exits.
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

	"github.com/decreehq/decree/worker"
)

type labelFlag []string

func (l *labelFlag) String() string     { return strings.Join(*l, ",") }
func (l *labelFlag) Set(s string) error { *l = append(*l, s); return nil }

func main() {
	os.Exit(run())
}

func run() int {
	var (
		controller = flag.String("controller", "", "controller address: unix:///path/.decree/decree.sock, a socket path, or host:port (default: the unix socket of --workspace)")
		workspace  = flag.String("workspace", ".", "project directory to work in")
		id         = flag.String("id", "", "worker id (default: kept in <workspace>/.decree/worker-id)")
		verbose    = flag.Bool("verbose", false, "log debug details")
		labels     labelFlag
	)
	flag.Var(&labels, "label", "label key=value (repeatable)")
	flag.Parse()
	if flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "decree-worker: unexpected arguments %q; see -help\n", flag.Args())
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
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// After the first signal the worker stops gracefully; a second one
	// gets the default behaviour (exit at once).
	context.AfterFunc(ctx, stop)
	err = worker.Run(ctx, worker.Options{
		Controller: *controller,
		Workspace:  *workspace,
		WorkerID:   *id,
		Labels:     parsed,
		Logger:     log,
	})
	if err != nil {
		fmt.Fprintf(os.Stderr, "decree-worker: %v\n", err)
		return 1
	}
	return 0
}
