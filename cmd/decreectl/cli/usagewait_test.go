package cli

import (
	"bufio"
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/creack/pty"
	decreev1 "github.com/decreehq/decree/proto/decree/v1"
	"google.golang.org/protobuf/types/known/timestamppb"
)

func TestUsageWaitLine(t *testing.T) {
	now := time.Now()
	until := now.Add(42*time.Minute + 30*time.Second)
	ev := &decreev1.Event{Kind: decreev1.EventKind_EVENT_KIND_USAGE_LIMIT_WAIT, MessageId: "2026112414000000-0", Until: timestamppb.New(until)}
	want := "decree: usage limit reached; waiting until " + until.Local().Format("15:04") + " (42m) to retry 2026112414000000-0"
	if got := eventLine(ev); got != want {
		t.Errorf("line = %q, want %q", got, want)
	}
}

// TestCountdown: on a terminal (a real pty) the wait line is followed by a
// live countdown that rewrites itself each second and is cleared at stop;
// elsewhere nothing is added.
func TestCountdown(t *testing.T) {
	ev := &decreev1.Event{Kind: decreev1.EventKind_EVENT_KIND_USAGE_LIMIT_WAIT, MessageId: "m-0", Until: timestamppb.New(time.Now().Add(5 * time.Second))}
	var plain bytes.Buffer
	g := &globals{stderr: &lockedWriter{w: &plain}}
	g.countdown(ev)()
	if plain.Len() != 0 {
		t.Errorf("countdown wrote to a non-terminal: %q", plain.String())
	}

	master, tty, err := pty.Open()
	if err != nil {
		t.Skipf("no pty: %v", err)
	}
	defer master.Close()
	defer tty.Close()
	g = &globals{stderr: &lockedWriter{w: tty}}
	stop := g.countdown(ev)
	got := make(chan string, 1)
	go func() {
		r := bufio.NewReader(master)
		var b strings.Builder
		for strings.Count(b.String(), "retry of m-0 in") < 2 {
			c, err := r.ReadByte()
			if err != nil {
				break
			}
			b.WriteByte(c)
		}
		got <- b.String()
	}()
	var out string
	select {
	case out = <-got:
	case <-time.After(10 * time.Second):
		t.Fatal("no countdown on the terminal")
	}
	stop()
	if !strings.Contains(out, "\r\033[Kdecree: retry of m-0 in 5s") && !strings.Contains(out, "in 4s") {
		t.Errorf("countdown output %q", out)
	}
	if strings.Count(out, "\r\033[K") < 2 {
		t.Errorf("the countdown line is not rewritten in place: %q", out)
	}
}
