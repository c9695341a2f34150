package interact

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"

	tea "github.com/charmbracelet/bubbletea"
	"golang.org/x/term"
)

// runProgram runs m as an inline Bubble Tea program on in/out and returns
// the final model. Signals (SIGINT) and the end of ctx stop it cleanly, the
// terminal restored.
func runProgram(ctx context.Context, m *model, in io.Reader, out io.Writer) (*model, error) {
	final, err := runTea(ctx, m, in, out)
	if err != nil {
		return nil, err
	}
	fm, ok := final.(*model)
	if !ok {
		return nil, fmt.Errorf("interactive run: unexpected final model %T", final)
	}
	return fm, nil
}

// runTea runs any model inline on in/out; a non-terminal input that ends
// sends the model an inputClosedMsg.
func runTea(ctx context.Context, m tea.Model, in io.Reader, out io.Writer) (tea.Model, error) {
	// A terminal is handed to Bubble Tea as is, so that it goes into raw
	// mode and its reads can be cancelled. Anything else (a pipe, a file) is
	// watched for end of file, which Bubble Tea would otherwise ignore and
	// wait forever.
	var eof *eofReader
	if !isTerminal(in) {
		eof = &eofReader{r: in}
		in = eof
	} else if !isTerminalWriter(out) {
		// The screen is the input's terminal, behind a writer that hides
		// it (decreectl locks its stdout). Without a terminal to ask,
		// Bubble Tea knows no width and so never erases the rest of a
		// redrawn line, leaving pieces of the old one ("✔ name: xuired)").
		out = termWriter{Writer: out, fd: in.(interface{ Fd() uintptr }).Fd()}
	}
	p := tea.NewProgram(m,
		tea.WithContext(ctx),
		tea.WithInput(in),
		tea.WithOutput(out),
	)
	if eof != nil {
		eof.onEOF(func() { go p.Send(inputClosedMsg{}) })
	}
	final, err := p.Run()
	if err != nil {
		switch {
		case ctx.Err() != nil:
			return nil, fmt.Errorf("interactive run: %w", ctx.Err())
		case errors.Is(err, tea.ErrInterrupted), errors.Is(err, tea.ErrProgramKilled):
			return nil, fmt.Errorf("%w (interrupted; nothing was submitted)", ErrAborted)
		}
		return nil, fmt.Errorf("interactive run: terminal user interface failed: %w", err)
	}
	return final, nil
}

func isTerminalWriter(w io.Writer) bool {
	f, ok := w.(interface{ Fd() uintptr })
	return ok && term.IsTerminal(int(f.Fd()))
}

// termWriter writes to w and names the terminal fd as its own, so Bubble
// Tea reads the window size (and its changes) from that terminal.
type termWriter struct {
	io.Writer
	fd uintptr
}

func (t termWriter) Read([]byte) (int, error) { return 0, io.EOF }
func (t termWriter) Close() error             { return nil }
func (t termWriter) Fd() uintptr              { return t.fd }

func isTerminal(r io.Reader) bool {
	f, ok := r.(interface{ Fd() uintptr })
	return ok && term.IsTerminal(int(f.Fd()))
}

// eofReader passes reads through and calls a function once when the
// underlying reader reports io.EOF.
type eofReader struct {
	r    io.Reader
	mu   sync.Mutex
	fn   func()
	seen bool
}

func (e *eofReader) onEOF(fn func()) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.fn = fn
	if e.seen {
		fn()
	}
}

func (e *eofReader) Read(p []byte) (int, error) {
	n, err := e.r.Read(p)
	if errors.Is(err, io.EOF) {
		e.mu.Lock()
		if !e.seen {
			e.seen = true
			if e.fn != nil {
				e.fn()
			}
		}
		e.mu.Unlock()
	}
	return n, err
}
