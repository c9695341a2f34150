package interact

import (
	"context"
	"errors"
	"testing"

	"github.com/decreehq/decree/internal/testtool"
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
			term := testtool.NewTerminal(t, 30, 100)
			ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
			defer cancel()
			type res struct {
				got string
				err error
			}
			done := make(chan res, 1)
			go func() {
				got, err := Choose(ctx, ChooseOptions{Label: "Skill", Choices: choices, Highlight: tc.highlight, In: term.Tty, Out: term.Tty})
				done <- res{got, err}
			}()
			term.WaitFor("Skill", waitLimit)
			term.Type(tc.keys...)
			r := <-done
			term.Tty.Close()
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
