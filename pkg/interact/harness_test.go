package interact

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/decreehq/decree/internal/testtool"
)

// Keys as a terminal sends them.
const (
	keyEnter     = "\r"
	keyDown      = "\x1b[B"
	keyUp        = "\x1b[A"
	keyEsc       = "\x1b"
	keyCtrlC     = "\x03"
	keyCtrlD     = "\x04"
	keyBackspace = "\x7f"
	keyLeft      = "\x1b[D"
)

// waitLimit bounds every wait in these tests; a correct run takes well
// under a second.
const waitLimit = 15 * time.Second

type askResult struct {
	a   *Answers
	err error
}

// ptyTerm runs Ask against the slave side of a real pseudo-terminal, as a
// person's terminal would be; the test types into the master side and reads
// what Ask draws.
type ptyTerm struct {
	t    *testing.T
	term *testtool.Terminal
	done chan struct{} // closed when Ask returns
	res  askResult
}

func startAsk(t *testing.T, opts Options) *ptyTerm {
	t.Helper()
	term := testtool.NewTerminal(t, 40, 100)
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	pt := &ptyTerm{t: t, term: term, done: make(chan struct{})}
	opts.In, opts.Out = term.Tty, term.Tty
	go func() {
		a, err := Ask(ctx, opts)
		pt.res = askResult{a, err}
		close(pt.done)
	}()
	t.Cleanup(func() {
		cancel()
		// Once Ask has returned normally, Bubble Tea has stopped reading the
		// terminal and it can be closed. After a failure (a timeout) its
		// reader may still be running: leave the tty open then rather
		// than pull the descriptor from under it. (The terminal's own
		// cleanup, which runs after this one, closes the master side.)
		if pt.returnedCleanly() {
			term.Tty.Close()
		}
	})
	// Keys typed before the program has put the terminal in raw mode would
	// be line-buffered by the kernel: wait for the first screen.
	pt.waitFor("Routine")
	return pt
}

// screen returns everything drawn so far, escape sequences removed.
func (pt *ptyTerm) screen() string { return pt.term.Screen() }

func (pt *ptyTerm) waitFor(text string) {
	pt.t.Helper()
	pt.term.WaitFor(text, waitLimit)
}

func (pt *ptyTerm) send(keys ...string) {
	pt.t.Helper()
	pt.term.Type(keys...)
}

// result waits for Ask to return.
func (pt *ptyTerm) result() (*Answers, error) {
	pt.t.Helper()
	select {
	case <-pt.done:
		return pt.res.a, pt.res.err
	case <-time.After(waitLimit + time.Second):
		pt.t.Fatalf("Ask did not return; the terminal shows:\n%s", pt.screen())
		return nil, nil
	}
}

func (pt *ptyTerm) answers() *Answers {
	pt.t.Helper()
	a, err := pt.result()
	if err != nil {
		pt.t.Fatalf("Ask: %v\nterminal:\n%s", err, pt.screen())
	}
	return a
}

// returnedCleanly reports whether Ask has returned, not because of the
// test's deadline.
func (pt *ptyTerm) returnedCleanly() bool {
	select {
	case <-pt.done:
		return !errors.Is(pt.res.err, context.DeadlineExceeded) && !errors.Is(pt.res.err, context.Canceled)
	default:
		return false
	}
}

// running reports whether Ask is still waiting for input.
func (pt *ptyTerm) running() bool {
	select {
	case <-pt.done:
		return false
	default:
		return true
	}
}

// askPipe runs Ask on plain in-memory input (not a terminal).
func askPipe(t *testing.T, opts Options, input io.Reader) (*Answers, string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	var out strings.Builder
	opts.In, opts.Out = input, &out
	a, err := Ask(ctx, opts)
	if errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Ask did not return on its own; output:\n%s", out.String())
	}
	return a, testtool.StripANSI(out.String()), err
}

func sampleRoutines() []Routine {
	return []Routine{
		{Name: "develop", Description: "Implement a spec", Params: []Param{{Name: "target_branch", Default: "main"}}},
		{Name: "deploy-docs", Description: "Publish the documentation"},
		{Name: "fix-types", Description: "Fix type errors", Params: []Param{{Name: "strict", Default: "false"}, {Name: "lang", Default: "go"}}},
		{Name: "refactor"},
	}
}
