package interact

import (
	"context"
	"errors"
	"io"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/creack/pty"
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
	t      *testing.T
	master *os.File
	mu     sync.Mutex
	out    strings.Builder
	done   chan struct{} // closed when Ask returns
	res    askResult
}

var ansi = regexp.MustCompile(`\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(\x07|\x1b\\)|\x1b[()][0-9A-Za-z]|\x1b[=>]`)

func startAsk(t *testing.T, opts Options) *ptyTerm {
	t.Helper()
	master, slave, err := pty.Open()
	if err != nil {
		t.Fatalf("open a pseudo-terminal: %v", err)
	}
	if err := pty.Setsize(master, &pty.Winsize{Rows: 40, Cols: 100}); err != nil {
		t.Fatalf("set terminal size: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	pt := &ptyTerm{t: t, master: master, done: make(chan struct{})}
	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		buf := make([]byte, 4096)
		for {
			n, err := master.Read(buf)
			pt.mu.Lock()
			pt.out.Write(buf[:n])
			pt.mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	opts.In, opts.Out = slave, slave
	go func() {
		a, err := Ask(ctx, opts)
		pt.res = askResult{a, err}
		close(pt.done)
	}()
	t.Cleanup(func() {
		cancel()
		// Once Ask has returned normally, Bubble Tea has stopped reading the
		// terminal and it can be closed. After a failure (a timeout) its
		// reader may still be running: leave the slave open then rather
		// than pull the descriptor from under it.
		if pt.returnedCleanly() {
			slave.Close()
		}
		master.Close()
		<-readDone
	})
	// Keys typed before the program has put the terminal in raw mode would
	// be line-buffered by the kernel: wait for the first screen.
	pt.waitFor("Routine")
	return pt
}

// screen returns everything drawn so far, escape sequences removed.
func (pt *ptyTerm) screen() string {
	pt.mu.Lock()
	defer pt.mu.Unlock()
	return ansi.ReplaceAllString(pt.out.String(), "")
}

func (pt *ptyTerm) waitFor(text string) {
	pt.t.Helper()
	deadline := time.Now().Add(waitLimit)
	for !strings.Contains(pt.screen(), text) {
		if time.Now().After(deadline) {
			pt.t.Fatalf("%q never appeared on the terminal; it shows:\n%s", text, pt.screen())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (pt *ptyTerm) send(keys ...string) {
	pt.t.Helper()
	for _, k := range keys {
		if _, err := pt.master.Write([]byte(k)); err != nil {
			pt.t.Fatalf("type %q: %v", k, err)
		}
	}
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
	return a, ansi.ReplaceAllString(out.String(), ""), err
}

func sampleRoutines() []Routine {
	return []Routine{
		{Name: "develop", Description: "Implement a spec", Params: []Param{{Name: "target_branch", Default: "main"}}},
		{Name: "deploy-docs", Description: "Publish the documentation"},
		{Name: "fix-types", Description: "Fix type errors", Params: []Param{{Name: "strict", Default: "false"}, {Name: "lang", Default: "go"}}},
		{Name: "refactor"},
	}
}
