package cli

import (
	"fmt"
	"os"
	"time"

	decreev1 "github.com/decreehq/decree/proto/decree/v1"
	"golang.org/x/term"
)

// usageWaitLine announces a usage-limit wait: "decree: usage limit
// reached; waiting until 15:00 (42m) to retry <id>".
func usageWaitLine(ev *decreev1.Event, now time.Time) string {
	until := ev.GetUntil().AsTime().Local()
	return fmt.Sprintf("decree: usage limit reached; waiting until %s (%s) to retry %s", until.Format("15:04"), span(until.Sub(now)), ev.GetMessageId())
}

// stderrIsTerminal reports whether the command's stderr is a terminal.
func (g *globals) stderrIsTerminal() bool {
	w := g.stderr
	if lw, ok := w.(*lockedWriter); ok {
		w = lw.w
	}
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// countdown keeps a live "retry in 41m59s" line under a usage-limit wait
// on a terminal, until stop is called (at the next event). Elsewhere
// (pipes, logs) the announcement line alone is printed.
func (g *globals) countdown(ev *decreev1.Event) (stop func()) {
	if ev.GetKind() != decreev1.EventKind_EVENT_KIND_USAGE_LIMIT_WAIT || !g.stderrIsTerminal() {
		return func() {}
	}
	until := ev.GetUntil().AsTime()
	done, finished := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			left := time.Until(until).Round(time.Second)
			if left < 0 {
				left = 0
			}
			fmt.Fprintf(g.stderr, "\r\033[Kdecree: retry of %s in %s (Ctrl-C stops; the message stays queued)", ev.GetMessageId(), left)
			select {
			case <-done:
				fmt.Fprint(g.stderr, "\r\033[K")
				return
			case <-t.C:
			}
		}
	}()
	return func() {
		select {
		case <-done:
		default:
			close(done)
		}
		<-finished
	}
}
