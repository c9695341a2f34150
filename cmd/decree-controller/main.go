// Command decree-controller serves one decree project: it owns the
// project's inbox, chains, checkpoints and retry state, and waits for
// workers (decree-worker) and clients (decreectl) on the project's unix
// socket, .decree/decree.sock (mode 0600).
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/decreehq/decree/controller"
)

func main() {
	os.Exit(run())
}

func run() int {
	project := flag.String("project", ".", "project directory (the one holding .decree/)")
	leaseTTL := flag.Duration("lease-ttl", 10*time.Second, "how long a worker's lease lives without a heartbeat")
	verbose := flag.Bool("verbose", false, "log debug detail")
	flag.Parse()
	level := slog.LevelInfo
	if *verbose {
		level = slog.LevelDebug
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	c, err := controller.New(controller.Options{Root: *project, Logger: log, LeaseTTL: *leaseTTL})
	if err != nil {
		fmt.Fprintln(os.Stderr, "decree-controller:", err)
		return 1
	}
	defer c.Close()
	lis, err := controller.ListenUnix(c.Store().Root())
	if err != nil {
		fmt.Fprintln(os.Stderr, "decree-controller:", err)
		return 1
	}
	log.Info("serving", "project", c.Store().Root(), "socket", lis.Addr().String())
	if err := c.Serve(ctx, lis); err != nil {
		fmt.Fprintln(os.Stderr, "decree-controller:", err)
		return 1
	}
	return 0
}
