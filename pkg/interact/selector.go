package interact

import (
	"strings"

	"github.com/charmbracelet/bubbles/list"
	tea "github.com/charmbracelet/bubbletea"
)

// routineItem adapts a Routine to bubbles/list.
type routineItem struct{ r Routine }

func (i routineItem) Title() string { return i.r.Name }
func (i routineItem) Description() string {
	if i.r.Description == "" {
		return "(no description)"
	}
	return i.r.Description
}

// FilterValue is what the fuzzy filter matches against: the name only, so
// a few letters of a name find it without surprises from descriptions.
func (i routineItem) FilterValue() string { return i.r.Name }

// selector is the routine chooser: a bubbles/list whose filter is driven
// synchronously by the selector itself. Any printable key filters at once
// (no "/" needed), and the matches are computed before the next key is
// handled, so Enter always picks from the list the person sees.
type selector struct {
	list   list.Model
	filter []rune
	// label heads the list ("Routine" unless set).
	label string
}

const (
	selectorMaxHeight = 20
	selectorMinHeight = 8
)

func newSelector(routines []Routine, highlight string, width, height int) selector {
	items := make([]list.Item, len(routines))
	sel := 0
	for i, r := range routines {
		items[i] = routineItem{r}
		if r.Name == highlight {
			sel = i
		}
	}
	d := list.NewDefaultDelegate()
	l := list.New(items, d, width, 0)
	l.SetShowTitle(false) // view draws its own title with the filter
	l.SetShowHelp(false)
	l.SetStatusBarItemName("routine", "routines")
	l.DisableQuitKeybindings()
	l.Filter = list.DefaultFilter // sahilm/fuzzy, best matches first
	s := selector{list: l, label: "Routine"}
	s.resize(width, height)
	s.list.Select(sel)
	return s
}

// resize fits the list to the terminal: every routine when they fit, at
// most selectorMaxHeight rows, never more than the terminal minus room for
// the hint line.
func (s *selector) resize(width, height int) {
	want := 3*len(s.list.Items()) + 5 // 3 rows per item, title, filter, status, pagination
	want = min(want, selectorMaxHeight)
	if height > 0 {
		want = min(want, height-2)
	}
	want = max(want, selectorMinHeight)
	s.list.SetSize(width, want)
}

// update handles a key press. It reports picked=true when Enter chose a
// routine, which is then s.selected().
func (s *selector) update(msg tea.KeyMsg) (picked bool) {
	switch msg.String() {
	case "enter":
		return s.list.SelectedItem() != nil
	case "up", "ctrl+p", "ctrl+k", "shift+tab":
		s.list.CursorUp()
	case "down", "ctrl+n", "ctrl+j", "tab":
		s.list.CursorDown()
	case "pgup":
		s.list.PrevPage()
	case "pgdown":
		s.list.NextPage()
	case "backspace", "ctrl+h":
		if len(s.filter) > 0 {
			s.setFilter(s.filter[:len(s.filter)-1])
		}
	case "ctrl+u", "ctrl+w":
		s.setFilter(nil)
	default:
		if msg.Type == tea.KeyRunes || msg.Type == tea.KeySpace {
			s.setFilter(append(s.filter, msg.Runes...))
		}
	}
	return false
}

// setFilter applies a new filter text; the list computes the fuzzy matches
// immediately and puts the cursor on the best one.
func (s *selector) setFilter(f []rune) {
	s.filter = f
	if len(f) == 0 {
		s.list.ResetFilter()
		return
	}
	// FilterApplied (not Filtering) so that the list highlights the cursor
	// row; the filter text is drawn by view.
	s.list.SetFilterText(string(f))
}

// selected returns the highlighted routine, if any is visible.
func (s *selector) selected() (Routine, bool) {
	it, ok := s.list.SelectedItem().(routineItem)
	return it.r, ok
}

// view draws the filter line and the list, without the blank rows the list
// pads itself with when few routines match.
func (s selector) view() string {
	var b strings.Builder
	b.WriteString(labelStyle.Render(s.label) + "  " + hintStyle.Render("filter:") + " " + string(s.filter) + "\n")
	lines := strings.Split(s.list.View(), "\n")
	for len(lines) > 0 && strings.TrimSpace(lines[len(lines)-1]) == "" {
		lines = lines[:len(lines)-1]
	}
	b.WriteString(strings.Join(lines, "\n"))
	return b.String()
}
