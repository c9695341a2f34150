// Command decreectl is decree's command-line client; the commands live in
// package cli so they can also be run in-process.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/decreehq/decree/cmd/decreectl/cli"
	"github.com/decreehq/decree/pkg/memlimit"
)

func main() {
	memlimit.Apply()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Main(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
