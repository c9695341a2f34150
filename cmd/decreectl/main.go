// Command decreectl is decree's command-line client. With --controller (or
// DECREE_CONTROLLER) it talks to that controller. Without, it uses the
// controller already serving this project on .decree/decree.sock, or else
// starts one embedded, with a local worker, for the duration of the command.
package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
)

// exitError carries a process exit code out of a command.
type exitError struct {
	code int
	msg  string
}

func (e *exitError) Error() string { return e.msg }

// globals are the flags every command shares.
type globals struct {
	project    string
	controller string
	output     string
	verbose    bool
	log        *slog.Logger
}

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	g := &globals{}
	root := newRoot(g)
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return 0
	}
	var ee *exitError
	if errors.As(err, &ee) {
		if ee.msg != "" {
			fmt.Fprintln(os.Stderr, "decreectl:", ee.msg)
		}
		return ee.code
	}
	fmt.Fprintln(os.Stderr, "decreectl:", err)
	if ctx.Err() != nil {
		return 130
	}
	return 1
}

func newRoot(g *globals) *cobra.Command {
	root := &cobra.Command{
		Use:           "decreectl",
		Short:         "Run spec-driven AI development: specs become messages, routines process them",
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			level := slog.LevelWarn
			if g.verbose {
				level = slog.LevelDebug
			}
			g.log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
			if g.output != "" && g.output != "text" && g.output != "json" {
				return &exitError{code: 2, msg: fmt.Sprintf("-o %s: choose text or json", g.output)}
			}
			return nil
		},
	}
	pf := root.PersistentFlags()
	pf.StringVarP(&g.project, "project", "C", "", "project directory (default: the nearest directory above with .decree/)")
	pf.StringVar(&g.controller, "controller", os.Getenv("DECREE_CONTROLLER"), "controller address: unix:///path/decree.sock or host:port (env DECREE_CONTROLLER)")
	pf.StringVarP(&g.output, "output", "o", "text", "output format of listings: text or json")
	pf.BoolVar(&g.verbose, "verbose", false, "log what decreectl and an embedded controller do")
	root.AddCommand(
		newInitCmd(g),
		newRunCmd(g),
		newProcessCmd(g),
		newStatusCmd(g),
		newRunsCmd(g),
		newLogsCmd(g),
		newDiffCmd(g),
		newRevertCmd(g),
		newRequeueCmd(g),
		newRoutinesCmd(g),
		newWorkersCmd(g),
	)
	return root
}
