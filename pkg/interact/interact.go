// Package interact asks a person at a terminal for the inputs of a new
// message: the interactive mode of `decreectl run` with no arguments.
//
// Ask walks through five steps, one at a time, in a single Bubble Tea
// program that renders inline (no alternate screen), so the answers stay in
// the terminal's scrollback:
//
//  1. routine: an arrow-key selector (bubbles/list) with fuzzy type-ahead
//     filtering (sahilm/fuzzy, the list's own filter). Typing letters
//     filters at once; Up/Down move; Enter picks the highlighted routine;
//     Backspace edits the filter. The last run's routine, else the
//     configured default, else the first routine, is highlighted at start.
//  2. message name: free text, required, turned into kebab-case with
//     message.KebabName.
//  3. input file: optional (Enter on an empty field skips).
//  4. custom parameters of the chosen routine, one prompt each, showing the
//     routine's default; a value equal to the default or empty is not
//     recorded, so the routine's own default applies.
//  5. body: multi-line free text, ended by an empty line or Ctrl-D (EOF);
//     required unless an input file was given; never pre-filled.
//
// Text prompts start pre-filled (from .decree/last-run.yml, or with the
// parameter's default). A pre-filled value is shown highlighted: Enter
// accepts it, typing replaces it, Backspace clears it, and the arrow keys
// (or Home/End) switch to editing it in place.
//
// Ctrl-C or Esc at any step aborts: Ask returns an error matching
// ErrAborted. The caller creates and submits the message; after the run
// succeeds it records the answers with SaveLastRun so the next interactive
// run suggests them again.
package interact

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
)

// ErrAborted is matched (errors.Is) by the error Ask returns when the person
// cancels with Ctrl-C or Esc, or the program is interrupted by a signal.
var ErrAborted = errors.New("interactive run cancelled")

// Param is one custom parameter a routine declares beyond the standard set.
type Param struct {
	Name    string
	Default string
}

// Routine is one choice offered by the routine selector.
type Routine struct {
	Name        string
	Description string
	// Params lists the routine's custom parameters only (not the standard
	// ones such as message_file or chain, which are never prompted).
	Params []Param
}

// Answers is what the person entered.
type Answers struct {
	// Routine is the chosen routine's name.
	Routine string
	// Name is the message name, already in kebab-case.
	Name string
	// InputFile is the path typed by the person, trimmed of surrounding
	// spaces; "" when skipped. Ask does not check it unless
	// Options.CheckInputFile is set.
	InputFile string
	// Custom holds only the custom parameters whose value differs from the
	// routine's default (and is not empty). Never nil.
	Custom map[string]string
	// Body is the message body: the lines entered, joined with "\n", without
	// a trailing newline; "" when skipped (only allowed with an input file).
	Body string
}

// IsSpec reports whether the input file is a spec (its name ends in
// ".spec.md"), in which case the message type is "spec".
func (a *Answers) IsSpec() bool {
	return strings.HasSuffix(a.InputFile, ".spec.md")
}

// Options configures Ask.
type Options struct {
	// Routines are the choices; at least one is required.
	Routines []Routine
	// DefaultRoutine is the configured default routine, highlighted first
	// when there is no usable last run.
	DefaultRoutine string
	// ProjectRoot is the project directory; the last run's answers are read
	// from ProjectRoot/.decree/last-run.yml. Empty: no recall.
	ProjectRoot string
	// In and Out are the terminal. When In is a terminal it is put in raw
	// mode for the duration of Ask and restored afterwards.
	In  io.Reader
	Out io.Writer
	// CheckInputFile, if set, is called with a non-empty input file path;
	// an error is shown under the prompt and the person is asked again.
	CheckInputFile func(path string) error
	// Logger receives a warning when last-run.yml cannot be used. Nil
	// discards.
	Logger *slog.Logger
}

// Ask runs the interactive prompts on opts.In/opts.Out and returns the
// answers. It fails with an error matching ErrAborted when the person
// cancels, with ctx's error when ctx ends first, and with an error matching
// io.ErrUnexpectedEOF when a non-terminal input ends before a required
// answer was given.
func Ask(ctx context.Context, opts Options) (*Answers, error) {
	if len(opts.Routines) == 0 {
		return nil, errors.New("interactive run: no routines to choose from: add a routine under .decree/routines/ (decreectl init creates examples)")
	}
	if opts.In == nil || opts.Out == nil {
		return nil, errors.New("interactive run: no terminal given (Options.In and Options.Out must be set)")
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	var last *LastRun
	if opts.ProjectRoot != "" {
		lr, err := LoadLastRun(opts.ProjectRoot)
		if err != nil {
			logger.Warn("ignoring the last interactive run's answers", "err", err)
		} else {
			last = lr
		}
	}
	m := newModel(opts, last)
	final, err := runProgram(ctx, m, opts.In, opts.Out)
	if err != nil {
		return nil, err
	}
	switch {
	case final.aborted:
		return nil, fmt.Errorf("%w (nothing was submitted)", ErrAborted)
	case final.inputClosed:
		return nil, fmt.Errorf("interactive run: the input ended before the %s was entered: %w", final.stepName(), io.ErrUnexpectedEOF)
	case final.step != stepDone:
		return nil, fmt.Errorf("interactive run: the prompts stopped before the %s was entered: %w", final.stepName(), ErrAborted)
	}
	a := final.answers
	return &a, nil
}
