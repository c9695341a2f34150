package interact

import (
	"context"
	"errors"
	"fmt"
	"io"

	tea "github.com/charmbracelet/bubbletea"
)

// Choice is one option of Choose.
type Choice struct {
	Name        string
	Description string
}

// ChooseOptions configure Choose.
type ChooseOptions struct {
	// Label heads the list ("Scope", "Skill", ...).
	Label string
	// Choices are offered in order; Highlight names the one selected at
	// start (the first when empty or unknown).
	Choices   []Choice
	Highlight string
	In        io.Reader
	Out       io.Writer
}

// Choose asks a person at a terminal to pick one of opts.Choices with the
// same selector as the routine step of Ask (arrow keys, fuzzy type-ahead,
// Enter) and returns its name. Ctrl-C, Esc or the end of the input returns
// an error matching ErrAborted.
func Choose(ctx context.Context, opts ChooseOptions) (string, error) {
	if len(opts.Choices) == 0 {
		return "", errors.New("choose: nothing to choose from")
	}
	items := make([]Routine, len(opts.Choices))
	for i, c := range opts.Choices {
		items[i] = Routine{Name: c.Name, Description: c.Description}
	}
	m := &chooser{sel: newSelector(items, opts.Highlight, defaultWidth, 0)}
	m.sel.label = opts.Label
	m.sel.list.SetStatusBarItemName("choice", "choices")
	final, err := runTea(ctx, m, opts.In, opts.Out)
	if err != nil {
		return "", err
	}
	c, ok := final.(*chooser)
	if !ok || c.aborted || c.picked == "" {
		return "", fmt.Errorf("%w: no %s chosen", ErrAborted, opts.Label)
	}
	return c.picked, nil
}

// chooser is the model behind Choose.
type chooser struct {
	sel     selector
	picked  string
	aborted bool
}

func (c *chooser) Init() tea.Cmd { return nil }

func (c *chooser) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		c.sel.resize(msg.Width, msg.Height)
	case inputClosedMsg:
		c.aborted = true
		return c, tea.Quit
	case tea.KeyMsg:
		switch msg.String() {
		case "ctrl+c", "esc":
			c.aborted = true
			return c, tea.Quit
		}
		if c.sel.update(msg) {
			r, _ := c.sel.selected()
			c.picked = r.Name
			return c, tea.Quit
		}
	}
	return c, nil
}

func (c *chooser) View() string {
	if c.picked != "" || c.aborted {
		return ""
	}
	return c.sel.view() + "\n" + hintStyle.Render(selectorHint) + "\n"
}
