package testtool

import (
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/creack/pty"
)

// Terminal is a pseudo-terminal for tests of interactive commands: the
// program under test reads and writes Tty, the test types with Type and
// reads what was drawn with Screen and WaitFor.
type Terminal struct {
	t      testing.TB
	Master *os.File
	Tty    *os.File // the program's side; the caller closes it
	mu     sync.Mutex
	out    strings.Builder
}

// ansiEscape matches terminal escape sequences (CSI, OSC, charset and
// keypad switches).
var ansiEscape = regexp.MustCompile(`\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(\x07|\x1b\\)|\x1b[()][0-9A-Za-z]|\x1b[=>]`)

// NewTerminal opens a pseudo-terminal of rows x cols and records
// everything drawn on it. The test's cleanup closes the master side and
// waits for the recording to end.
func NewTerminal(t testing.TB, rows, cols uint16) *Terminal {
	t.Helper()
	master, tty, err := pty.Open()
	if err != nil {
		t.Fatalf("open a pseudo-terminal: %v", err)
	}
	if err := pty.Setsize(master, &pty.Winsize{Rows: rows, Cols: cols}); err != nil {
		t.Fatalf("set the terminal's size: %v", err)
	}
	term := &Terminal{t: t, Master: master, Tty: tty}
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 4096)
		for {
			n, err := master.Read(buf)
			term.mu.Lock()
			term.out.Write(buf[:n])
			term.mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	t.Cleanup(func() {
		master.Close()
		<-done
	})
	return term
}

// StripANSI removes terminal escape sequences from s.
func StripANSI(s string) string { return ansiEscape.ReplaceAllString(s, "") }

// Screen is everything drawn so far, escape sequences removed.
func (term *Terminal) Screen() string {
	term.mu.Lock()
	defer term.mu.Unlock()
	return StripANSI(term.out.String())
}

// WaitFor waits up to d for text to appear on the screen, failing the test
// with what the screen shows when it does not.
func (term *Terminal) WaitFor(text string, d time.Duration) {
	term.t.Helper()
	deadline := time.Now().Add(d)
	for !strings.Contains(term.Screen(), text) {
		if time.Now().After(deadline) {
			term.t.Fatalf("%q never appeared on the terminal; it shows:\n%s", text, term.Screen())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Type sends keys to the program as a person typing them would.
func (term *Terminal) Type(keys ...string) {
	term.t.Helper()
	for _, k := range keys {
		if _, err := term.Master.Write([]byte(k)); err != nil {
			term.t.Fatalf("type %q: %v", k, err)
		}
	}
}
