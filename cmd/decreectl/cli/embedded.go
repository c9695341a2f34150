package cli

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/decreehq/decree/controller"
	"github.com/decreehq/decree/pkg/config"
	"github.com/decreehq/decree/pkg/layout"
	"github.com/decreehq/decree/worker"
)

// startEmbedded starts a controller serving root on .decree/decree.sock and
// a local worker on the same tree, both in this process; the worker talks
// to the controller through the socket like any other worker. stop ends
// the controller first (an attempt under way is stopped and counts as
// interrupted, to be retried by the next command), then the worker. With
// process false the controller does not run its processing loop: commands
// that only inspect or edit the project never start a routine; with process
// true the loop starts when the command's request (a submitted message, a
// process job) is in place, so the command sees every message it runs.
//
// Before it stops, a controller that processes waits for the chains still
// queued that were submitted to it, by this command or by another decreectl
// that joined it through the socket, unless ctx ended (Ctrl-C): then it
// stops at once and the attempt under way is recorded as interrupted.
// embeddedHeartbeat is the local worker's heartbeat period: short, so that
// Ctrl-C stops the routine at once (a stop rides on a heartbeat answer).
const embeddedHeartbeat = 300 * time.Millisecond

func startEmbedded(ctx context.Context, root string, log *slog.Logger, stderr io.Writer, process bool) (string, *controller.Controller, func(), error) {
	c, err := controller.New(controller.Options{Root: root, Logger: log.With("part", "controller"), NoProcessing: !process, StartPaused: true, FixedWorkers: true, OwnChainsOnly: true,
		HeartbeatInterval: embeddedHeartbeat})
	if err != nil {
		return "", nil, nil, err
	}
	lis, err := controller.ListenUnix(root)
	if err != nil {
		c.Close()
		return "", nil, nil, err
	}
	target := "unix://" + layout.SocketPath(root)
	cctx, cancelController := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- c.Serve(cctx, lis) }()
	wctx, cancelWorker := context.WithCancel(context.Background())
	worked := make(chan error, 1)
	// The local worker reports only errors unless --verbose: its
	// reconnect notices during shutdown are expected and not news.
	wlog := log.With("part", "worker")
	if !log.Enabled(ctx, slog.LevelDebug) {
		wlog = slog.New(newLineHandler(stderr, slog.LevelError, nil))
	}
	go func() {
		worked <- worker.Run(wctx, worker.Options{Controller: target, Workspace: root, Logger: wlog, Logs: c.LocalLogs()})
	}()
	lanes := 0
	if process {
		lanes = laneWorkers(root)
	}
	laneDone := make(chan error, lanes)
	for k := 1; k <= lanes; k++ {
		ws := layout.Path(root, "workspaces", fmt.Sprintf("lane-%d", k))
		go func() {
			if err := os.MkdirAll(ws, 0o755); err != nil {
				laneDone <- err
				return
			}
			laneDone <- worker.Run(wctx, worker.Options{Controller: target, Workspace: ws, Logger: wlog, Logs: c.LocalLogs()})
		}()
	}
	if lanes > 0 {
		// The lanes' workers connect before the first message is taken,
		// so that the first chains already run side by side.
		waitFor(ctx, 10*time.Second, func() bool { return c.Pipeline().ReplicaWorkers() >= lanes })
	}
	stop := func() {
		if process {
			wait := func(chains []string) {
				fmt.Fprintf(stderr, "decree: waiting for chain(s) %s, submitted to this controller by another decreectl, before stopping it\n", strings.Join(chains, ", "))
			}
			c.Pipeline().WaitPending(ctx, wait)
			// Refuse new submissions, then wait for one that slipped in.
			c.Pipeline().Stop()
			c.Pipeline().WaitPending(ctx, wait)
		}
		cancelController()
		if err := <-served; err != nil {
			log.Error("embedded controller", "err", err)
		}
		cancelWorker()
		if err := <-worked; err != nil {
			log.Debug("embedded worker", "err", err)
		}
		for range lanes {
			if err := <-laneDone; err != nil {
				log.Debug("embedded lane worker", "err", err)
			}
		}
		c.Close()
	}
	select {
	case err := <-worked:
		cancelController()
		<-served
		c.Close()
		return "", nil, nil, fmt.Errorf("start the local worker: %w", err)
	default:
	}
	return target, c, stop, nil
}

// laneWorkers is how many replica workers an embedded controller starts
// for parallel lanes: config.yml's parallel when above 1, else none. Their
// workspaces are .decree/workspaces/lane-K, kept between commands so that
// a worker syncs only what changed.
func laneWorkers(root string) int {
	cfg, _, err := config.Load(layout.Path(root, layout.Config))
	if err != nil || cfg.Parallel <= 1 {
		return 0
	}
	return cfg.Parallel
}

// waitFor polls cond until it holds, ctx ends or d passed.
func waitFor(ctx context.Context, d time.Duration, cond func() bool) {
	deadline := time.Now().Add(d)
	for !cond() && time.Now().Before(deadline) && ctx.Err() == nil {
		time.Sleep(20 * time.Millisecond)
	}
}
