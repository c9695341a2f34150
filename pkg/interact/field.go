package interact

import (
	"slices"

	"github.com/charmbracelet/bubbles/cursor"
	"github.com/charmbracelet/bubbles/textinput"
	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"
)

var (
	labelStyle    = lipgloss.NewStyle().Bold(true)
	hintStyle     = lipgloss.NewStyle().Faint(true)
	errorStyle    = lipgloss.NewStyle().Foreground(lipgloss.Color("1"))
	pristineStyle = lipgloss.NewStyle().Reverse(true)
	doneStyle     = lipgloss.NewStyle().Foreground(lipgloss.Color("2"))
)

// field is one line of text input that may start pre-filled. While the
// pre-filled value is untouched ("pristine") it behaves like selected text in
// a form: Enter accepts it, typing replaces it, Backspace (or Ctrl-U/Ctrl-W)
// clears it, and a cursor movement starts editing it in place.
type field struct {
	input    textinput.Model
	pristine bool
}

func newField(prompt, prefill string) field {
	ti := textinput.New()
	ti.Prompt = prompt
	ti.Cursor.SetMode(cursor.CursorStatic) // no blink ticks: a quiet, steady screen
	ti.Focus()
	f := field{input: ti}
	if prefill != "" {
		f.input.SetValue(prefill)
		f.input.CursorEnd()
		f.setPristine(true)
	}
	return f
}

func (f *field) setPristine(p bool) {
	f.pristine = p
	if p {
		f.input.TextStyle = pristineStyle
	} else {
		f.input.TextStyle = lipgloss.NewStyle()
	}
}

func (f *field) value() string { return f.input.Value() }

// clear empties the field and leaves the pristine state.
func (f *field) clear() {
	f.input.SetValue("")
	f.setPristine(false)
}

// update applies a key press that the caller did not handle itself.
func (f *field) update(msg tea.KeyMsg) tea.Cmd {
	if f.pristine {
		switch msg.String() {
		case "backspace", "ctrl+h", "ctrl+u", "ctrl+w", "alt+backspace":
			f.clear()
			return nil
		}
		if msg.Type == tea.KeyRunes || msg.Type == tea.KeySpace {
			f.clear()
		} else {
			f.setPristine(false)
		}
	}
	// textinput sanitizes the runes in place, and Bubble Tea may hand out
	// the same backing array for a key to every program in the process:
	// give textinput a private copy.
	msg.Runes = slices.Clone(msg.Runes)
	var cmd tea.Cmd
	f.input, cmd = f.input.Update(msg)
	return cmd
}

func (f field) view() string { return f.input.View() }
