// Package cli is decreectl, decree's command-line client, as a library: Main
// runs one command line with the given standard streams, so the command can
// be embedded and driven from tests in-process. With --controller (or
// DECREE_CONTROLLER) it talks to that controller. Without, it uses the
// controller already serving this project on .decree/decree.sock, or else
// starts one embedded, with a local worker, for the duration of the command.
//
// Everything the commands print goes to the writers given to Main; nothing
// here touches os.Stdout, os.Stderr or os.Stdin.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"

	"github.com/spf13/cobra"
	"golang.org/x/term"
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
	remote     remoteFlags
	output     string
	verbose    bool
	log        *slog.Logger
	// shown are warnings the log printed, so the event printer does not
	// print them again (loglines.go).
	shown *shownWarnings
	// process is set by commands that process messages (run, process):
	// only they let an embedded controller run its processing loop.
	process bool

	// The command's standard streams.
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer
}

// Main runs decreectl with args (without the program name) and returns the
// exit status: 0 on success, 1 when work failed (e.g. a message was
// dead-lettered), 2 for bad arguments, 130 when ctx was cancelled. stdin is
// read for a piped message body; it counts as a terminal only when it is an
// *os.File attached to one.
func Main(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if stdin == nil {
		stdin = eofReader{}
	}
	// The embedded controller logs to stderr from its own goroutines while
	// the command prints progress: serialise writes to each stream.
	stdout, stderr = &lockedWriter{w: stdout}, &lockedWriter{w: stderr}
	g := &globals{stdin: stdin, stdout: stdout, stderr: stderr}
	root := newRoot(g)
	root.SetArgs(args)
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return 0
	}
	var ee *exitError
	if errors.As(err, &ee) {
		if ee.msg != "" {
			fmt.Fprintln(stderr, "decreectl:", ee.msg)
		}
		return ee.code
	}
	fmt.Fprintln(stderr, "decreectl:", err)
	if ctx.Err() != nil {
		return 130
	}
	return 1
}

// lockedWriter makes a writer safe for concurrent use.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// eofReader is an empty standard input.
type eofReader struct{}

func (eofReader) Read([]byte) (int, error) { return 0, io.EOF }

// stdinIsTerminal reports whether standard input is an interactive terminal.
func (g *globals) stdinIsTerminal() bool {
	f, ok := g.stdin.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

func newRoot(g *globals) *cobra.Command {
	root := &cobra.Command{
		Use:           "decreectl",
		Short:         "Run spec-driven AI development: specs become messages, routines process them",
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			g.shown = &shownWarnings{}
			g.log = slog.New(newLineHandler(g.stderr, slog.LevelWarn, g.shown))
			if g.verbose { // everything, as slog lines with their times
				g.log = slog.New(slog.NewTextHandler(g.stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
			}
			if g.output != "" && g.output != "text" && g.output != "json" {
				return &exitError{code: 2, msg: fmt.Sprintf("-o %s: choose text or json", g.output)}
			}
			return nil
		},
	}
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error {
		return &exitError{code: 2, msg: err.Error() + " (see --help)"}
	})
	pf := root.PersistentFlags()
	pf.StringVarP(&g.project, "project", "C", "", "project directory (default: the nearest directory above with .decree/)")
	pf.StringVar(&g.controller, "controller", os.Getenv("DECREE_CONTROLLER"), "controller address: unix:///path/decree.sock or host:port (env DECREE_CONTROLLER)")
	addRemoteFlags(pf, &g.remote)
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
		newCancelCmd(g),
		newWaitsCmd(g),
		newReplyCmd(g),
		newRoutinesCmd(g),
		newWorkersCmd(g),
		newRoutineSyncCmd(g),
		newPromptCmd(g),
		newSkillCmd(g),
		newCronCmd(g),
		newDaemonCmd(g),
		newTreeCmd(g),
		newUsageCmd(g),
		newCostCmd(g),
	)
	return root
}
