package interact

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/creack/pty"
)

// TestChoose drives Choose on a real pseudo-terminal: arrow keys, fuzzy
// typing and Enter pick a choice; Esc aborts.
func TestChoose(t *testing.T) {
	t.Parallel()
	choices := []Choice{{"all", "every bundled skill"}, {"decree", "the project"}, {"decree-routine", "writing routines"}}
	cases := []struct {
		name      string
		highlight string
		keys      []string
		want      string // "" = aborted
	}{
		{"enter takes the highlight", "decree", []string{keyEnter}, "decree"},
		{"arrow down", "", []string{keyDown, keyEnter}, "decree"},
		{"fuzzy typing", "", []string{"drtn", keyEnter}, "decree-routine"},
		{"esc aborts", "", []string{keyEsc}, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			master, slave, err := pty.Open()
			if err != nil {
				t.Fatalf("open a pseudo-terminal: %v", err)
			}
			defer master.Close()
			pty.Setsize(master, &pty.Winsize{Rows: 30, Cols: 100})
			var mu sync.Mutex
			var screen strings.Builder
			go func() {
				buf := make([]byte, 4096)
				for {
					n, err := master.Read(buf)
					mu.Lock()
					screen.Write(buf[:n])
					mu.Unlock()
					if err != nil {
						return
					}
				}
			}()
			ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
			defer cancel()
			type res struct {
				got string
				err error
			}
			done := make(chan res, 1)
			go func() {
				got, err := Choose(ctx, ChooseOptions{Label: "Skill", Choices: choices, Highlight: tc.highlight, In: slave, Out: slave})
				done <- res{got, err}
			}()
			deadline := time.Now().Add(waitLimit)
			for {
				mu.Lock()
				shown := strings.Contains(ansi.ReplaceAllString(screen.String(), ""), "Skill")
				mu.Unlock()
				if shown {
					break
				}
				if time.Now().After(deadline) {
					t.Fatal("the chooser never appeared")
				}
				time.Sleep(5 * time.Millisecond)
			}
			master.Write([]byte(strings.Join(tc.keys, "")))
			r := <-done
			slave.Close()
			if tc.want == "" {
				if !errors.Is(r.err, ErrAborted) {
					t.Fatalf("Choose = %q, %v; want ErrAborted", r.got, r.err)
				}
				return
			}
			if r.err != nil || r.got != tc.want {
				t.Fatalf("Choose = %q, %v; want %q", r.got, r.err, tc.want)
			}
		})
	}
}
