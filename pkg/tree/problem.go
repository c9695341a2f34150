package tree

import (
	"fmt"
	"strings"
)

// Problem is one thing wrong with a chart.
type Problem struct {
	// Where is the node or line it concerns ("node 4 (row 5) \"...\"",
	// "line 9 (row 11)"); "" for the document as a whole.
	Where string
	// Msg says what is wrong and how to fix it.
	Msg string
}

func (p Problem) String() string {
	if p.Where == "" {
		return p.Msg
	}
	return p.Where + ": " + p.Msg
}

// Error lists every problem found in one file.
type Error struct {
	File     string
	Problems []Problem
}

func (e *Error) Error() string {
	if len(e.Problems) == 1 {
		return fmt.Sprintf("decision tree %s: %s", e.File, e.Problems[0])
	}
	var b strings.Builder
	fmt.Fprintf(&b, "decision tree %s has %d problems:", e.File, len(e.Problems))
	for _, p := range e.Problems {
		b.WriteString("\n  - ")
		b.WriteString(p.String())
	}
	return b.String()
}

// problems collects Problems for one file.
type problems struct {
	file string
	list []Problem
}

func (ps *problems) add(where, format string, args ...any) {
	ps.list = append(ps.list, Problem{Where: where, Msg: fmt.Sprintf(format, args...)})
}

// err returns nil or an *Error with every problem.
func (ps *problems) err() error {
	if len(ps.list) == 0 {
		return nil
	}
	return &Error{File: ps.file, Problems: ps.list}
}

// lineLabel names a line in messages: `line 9 (row 11)`.
func lineLabel(l *Line) string {
	if strings.HasPrefix(l.Where, "line ") {
		return l.Where
	}
	return fmt.Sprintf("line %s (%s)", l.ID, l.Where)
}
