package interact

import (
	"fmt"
	"strings"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/decreehq/decree/pkg/message"
)

type step int

const (
	stepRoutine step = iota
	stepName
	stepInput
	stepCustom
	stepBody
	stepDone
)

// inputClosedMsg is sent when a non-terminal input reaches end of file.
type inputClosedMsg struct{}

// printedMsg follows each batch of transcript lines through the event loop:
// when the model sees it, the renderer has queued those lines.
type printedMsg struct{}

const (
	defaultWidth  = 80
	fieldHint     = "Enter accepts · type to replace · ←/→ to edit · Esc cancels"
	emptyHint     = "Enter to confirm · Esc cancels"
	selectorHint  = "↑/↓ move · type to filter · Enter selects · Esc cancels"
	bodyHintFirst = "End with an empty line or Ctrl-D · Esc cancels"
)

// model is the Bubble Tea model behind Ask: one step at a time, answers
// printed above the live area as they are given.
type model struct {
	opts     Options
	last     *LastRun
	step     step
	width    int
	height   int
	sel      selector
	field    field
	custom   []Param // params of the chosen routine
	customAt int
	lines    []string // body lines entered so far
	errText  string   // validation message under the current prompt
	answers  Answers

	aborted     bool
	inputClosed bool

	// Transcript lines go out one batch at a time, in order, and the
	// program quits only once all are out (Bubble Tea runs commands
	// concurrently, so two Println commands, or a Println and Quit, could
	// otherwise overtake each other).
	outbox   []string
	printing bool
	quitting bool
}

func newModel(opts Options, last *LastRun) *model {
	m := &model{opts: opts, last: last, width: defaultWidth}
	m.answers.Custom = map[string]string{}
	highlight := opts.DefaultRoutine
	if last != nil && m.hasRoutine(last.Routine) {
		highlight = last.Routine
	}
	m.sel = newSelector(opts.Routines, highlight, m.width, 0)
	return m
}

func (m *model) hasRoutine(name string) bool {
	for _, r := range m.opts.Routines {
		if r.Name == name {
			return true
		}
	}
	return false
}

func (m *model) stepName() string {
	switch m.step {
	case stepRoutine:
		return "routine"
	case stepName:
		return "message name"
	case stepInput:
		return "input file"
	case stepCustom:
		return "custom parameters"
	case stepBody:
		return "message body"
	}
	return "end"
}

func (m *model) Init() tea.Cmd { return nil }

func (m *model) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		m.width, m.height = msg.Width, msg.Height
		m.sel.resize(m.width, m.height)
		return m, nil
	case inputClosedMsg:
		return m, m.inputEnded()
	case printedMsg:
		return m, m.nextPrint()
	case tea.KeyMsg:
		switch msg.String() {
		case "ctrl+c", "esc":
			m.aborted = true
			return m, tea.Quit
		}
		return m, m.key(msg)
	}
	return m, nil
}

func (m *model) key(msg tea.KeyMsg) tea.Cmd {
	switch m.step {
	case stepRoutine:
		if !m.sel.update(msg) {
			return nil
		}
		r, _ := m.sel.selected()
		m.answers.Routine = r.Name
		m.custom = r.Params
		return m.advance(done("Routine", r.Name))
	case stepBody:
		return m.bodyKey(msg)
	}
	if msg.String() != "enter" {
		m.errText = ""
		return m.field.update(msg)
	}
	return m.submitField()
}

// submitField validates and records the answer of a one-line step.
func (m *model) submitField() tea.Cmd {
	v := strings.TrimSpace(m.field.value())
	switch m.step {
	case stepName:
		if v == "" {
			m.errText = "A message name is required."
			return nil
		}
		name := message.KebabName(v)
		if name == "" {
			m.errText = fmt.Sprintf("%q has no letters or digits to build a name from; type another name.", v)
			return nil
		}
		m.answers.Name = name
		return m.advance(done("Message name", name))
	case stepInput:
		if v != "" && m.opts.CheckInputFile != nil {
			if err := m.opts.CheckInputFile(v); err != nil {
				m.errText = err.Error()
				return nil
			}
		}
		m.answers.InputFile = v
		shown := v
		if v == "" {
			shown = "(none)"
		}
		return m.advance(done("Input file", shown))
	case stepCustom:
		p := m.custom[m.customAt]
		shown := v
		if v == "" || v == p.Default {
			shown = p.Default + " (default)"
		} else {
			m.answers.Custom[p.Name] = v
		}
		m.customAt++
		return m.advance(done(p.Name, shown))
	}
	return nil
}

// advance moves to the next step that has something to ask, printing line
// (the answer just given) above the live area.
func (m *model) advance(line string) tea.Cmd {
	m.errText = ""
	switch m.step {
	case stepRoutine:
		m.step = stepName
	case stepName:
		m.step = stepInput
	case stepInput:
		m.step = stepCustom
		m.customAt = 0
	case stepCustom:
		// stays until every parameter was asked
	}
	if m.step == stepCustom && m.customAt >= len(m.custom) {
		m.step = stepBody
	}
	m.prepareField()
	return m.print(line)
}

// prepareField sets up the text field of the current step, pre-filled from
// the last run where the spec allows it (never for the body).
func (m *model) prepareField() {
	switch m.step {
	case stepName:
		prefill := ""
		if m.last != nil {
			prefill = m.last.MessageName
		}
		m.field = newField("> ", prefill)
	case stepInput:
		prefill := ""
		if m.last != nil {
			prefill = m.last.InputFile
		}
		m.field = newField("> ", prefill)
	case stepCustom:
		p := m.custom[m.customAt]
		prefill := p.Default
		if m.last != nil && m.last.Routine == m.answers.Routine {
			if v, ok := m.last.Custom[p.Name]; ok {
				prefill = v
			}
		}
		m.field = newField("> ", prefill)
	case stepBody:
		m.field = newField("│ ", "")
	}
}

// bodyKey handles a key while the body is being typed.
func (m *model) bodyKey(msg tea.KeyMsg) tea.Cmd {
	switch {
	case msg.String() == "enter":
		line := m.field.value()
		if strings.TrimSpace(line) == "" {
			return m.finishBody()
		}
		m.field = newField("│ ", "")
		m.errText = ""
		return m.addBodyLines(line)
	case msg.String() == "ctrl+d":
		if line := m.field.value(); strings.TrimSpace(line) != "" {
			m.field = newField("│ ", "")
			return tea.Batch(m.addBodyLines(line), m.finishBody())
		}
		return m.finishBody()
	case msg.Paste && strings.ContainsAny(string(msg.Runes), "\r\n"):
		return m.pasteBody(string(msg.Runes))
	}
	m.errText = ""
	return m.field.update(msg)
}

// pasteBody splits pasted text into lines. Empty lines inside a paste are
// kept as paragraph breaks: only a typed empty line ends the body.
func (m *model) pasteBody(text string) tea.Cmd {
	text = strings.ReplaceAll(strings.ReplaceAll(text, "\r\n", "\n"), "\r", "\n")
	parts := strings.Split(text, "\n")
	parts[0] = m.field.value() + parts[0]
	m.field = newField("│ ", "")
	m.field.input.SetValue(parts[len(parts)-1])
	m.errText = ""
	return m.addBodyLines(parts[:len(parts)-1]...)
}

// addBodyLines records complete body lines and prints them above the live
// area, under the body's label the first time.
func (m *model) addBodyLines(lines ...string) tea.Cmd {
	if len(lines) == 0 {
		return nil
	}
	out := make([]string, 0, len(lines)+1)
	if len(m.lines) == 0 {
		out = append(out, labelStyle.Render(m.bodyLabel()))
	}
	for _, l := range lines {
		out = append(out, bodyLine(l))
	}
	m.lines = append(m.lines, lines...)
	return m.print(out...)
}

func (m *model) bodyLabel() string {
	if m.answers.InputFile != "" {
		return "Message body (optional: Enter on an empty line skips)"
	}
	return "Message body (required)"
}

func (m *model) finishBody() tea.Cmd {
	// Trailing blank lines (from a paste or Ctrl-D) carry nothing.
	for len(m.lines) > 0 && strings.TrimSpace(m.lines[len(m.lines)-1]) == "" {
		m.lines = m.lines[:len(m.lines)-1]
	}
	if len(m.lines) == 0 && m.answers.InputFile == "" {
		m.errText = "A body is required when there is no input file: describe the work to do."
		m.field = newField("│ ", "")
		return nil
	}
	m.answers.Body = strings.Join(m.lines, "\n")
	m.step = stepDone
	if len(m.lines) == 0 {
		return tea.Batch(m.print(done("Message body", "(none)")), m.quit())
	}
	return m.quit()
}

// inputEnded handles end of file on a non-terminal input: it ends the body
// like Ctrl-D; at any other step the prompts cannot complete.
func (m *model) inputEnded() tea.Cmd {
	if m.step == stepBody {
		if line := m.field.value(); line != "" {
			m.lines = append(m.lines, line)
		}
		if cmd := m.finishBody(); m.step == stepDone {
			return cmd
		}
	}
	m.inputClosed = true
	return m.quit()
}

func done(label, value string) string {
	return doneStyle.Render("✔") + " " + labelStyle.Render(label+":") + " " + value
}

func bodyLine(s string) string { return hintStyle.Render("│ ") + s }

func (m *model) View() string {
	if m.step == stepDone || m.aborted || m.inputClosed {
		return ""
	}
	var b strings.Builder
	switch m.step {
	case stepRoutine:
		b.WriteString(m.sel.view())
		b.WriteString("\n\n" + hintStyle.Render(selectorHint))
		if _, ok := m.sel.selected(); !ok {
			b.WriteString("\n" + errorStyle.Render(fmt.Sprintf("No routine matches %q: Backspace widens the filter.", string(m.sel.filter))))
		}
	case stepBody:
		if len(m.lines) == 0 {
			b.WriteString(labelStyle.Render(m.bodyLabel()) + "\n")
		}
		b.WriteString(m.field.view())
		b.WriteString("\n" + hintStyle.Render(bodyHintFirst))
	default:
		b.WriteString(labelStyle.Render(m.promptLabel()) + "\n")
		b.WriteString(m.field.view())
		hint := emptyHint
		if m.field.pristine {
			hint = fieldHint
		}
		b.WriteString("\n" + hintStyle.Render(hint))
	}
	if m.errText != "" {
		b.WriteString("\n" + errorStyle.Render(m.errText))
	}
	return b.String()
}

func (m *model) promptLabel() string {
	switch m.step {
	case stepName:
		return "Message name (required)"
	case stepInput:
		return "Input file (optional: Enter on an empty field skips)"
	case stepCustom:
		p := m.custom[m.customAt]
		def := p.Default
		if def == "" {
			def = "empty"
		}
		return fmt.Sprintf("%s (routine default: %s)", p.Name, def)
	}
	return ""
}

// print sends lines to the transcript above the live area, after any lines
// still on their way.
func (m *model) print(lines ...string) tea.Cmd {
	m.outbox = append(m.outbox, lines...)
	if m.printing {
		return nil
	}
	return m.nextPrint()
}

// nextPrint sends the waiting lines, or quits when none are left and the
// prompts are over.
func (m *model) nextPrint() tea.Cmd {
	if len(m.outbox) == 0 {
		m.printing = false
		if m.quitting {
			return tea.Quit
		}
		return nil
	}
	text := strings.Join(m.outbox, "\n")
	m.outbox, m.printing = nil, true
	return tea.Sequence(tea.Println(text), func() tea.Msg { return printedMsg{} })
}

// quit ends the program once the transcript is complete.
func (m *model) quit() tea.Cmd {
	m.quitting = true
	if m.printing || len(m.outbox) > 0 {
		return nil
	}
	return tea.Quit
}
