package cron

import (
	"bytes"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/decreehq/decree/pkg/message"
)

// Entry is one cron file (.decree/cron/<stem>.md): a message with a
// schedule in its frontmatter.
type Entry struct {
	// File is the file name, Stem the name without ".md".
	File string
	Stem string
	// Schedule is the parsed `cron:` value, in its zone.
	Schedule *Schedule
	// CatchUp is `catch_up: true`: after downtime, one missed fire runs.
	CatchUp bool
	// Routine is the `routine:` field, "" when the file names none.
	Routine string
	// Message is the file without the scheduling fields (cron, catch_up):
	// what each fire puts into the inbox.
	Message *message.Message
}

// FileError is a problem with a cron file, at a 1-based line.
type FileError struct {
	File string
	Line int
	Err  error
}

func (e *FileError) Error() string {
	return fmt.Sprintf("%s:%d: %v", e.File, e.Line, e.Err)
}

func (e *FileError) Unwrap() error { return e.Err }

// ParseFile reads a cron file named name. Schedules without CRON_TZ= run in
// loc. Errors are *FileError values naming the file and line.
func ParseFile(name string, data []byte, loc *time.Location) (*Entry, error) {
	e := &Entry{File: name, Stem: strings.TrimSuffix(name, ".md")}
	m, err := message.Parse(data)
	if err != nil {
		line := 1
		var pe *message.ParseError
		if errors.As(err, &pe) {
			line = pe.Line
		}
		return nil, &FileError{File: name, Line: line, Err: err}
	}
	v, ok := m.Get("cron")
	if !ok {
		return nil, &FileError{File: name, Line: 1, Err: errors.New(`no "cron:" field; add frontmatter such as "cron: \"0 9 * * 1-5\"" (minute hour day-of-month month day-of-week)`)}
	}
	expr, isText := v.(string)
	if !isText {
		expr = message.ParamValue(v)
	}
	if e.Schedule, err = Parse(expr, loc); err != nil {
		return nil, &FileError{File: name, Line: keyLine(data, "cron"), Err: fmt.Errorf("cron: %w", err)}
	}
	if v, ok := m.Get("catch_up"); ok {
		b, isBool := v.(bool)
		if !isBool {
			return nil, &FileError{File: name, Line: keyLine(data, "catch_up"), Err: fmt.Errorf("catch_up: %q is not true or false", message.ParamValue(v))}
		}
		e.CatchUp = b
	}
	m.Delete("cron")
	m.Delete("catch_up")
	e.Routine = m.Routine()
	e.Message = m
	return e, nil
}

// keyLine finds the line of a top-level frontmatter key (1 when not found).
func keyLine(data []byte, key string) int {
	re := regexp.MustCompile(`^["']?` + regexp.QuoteMeta(key) + `["']?\s*:`)
	data = bytes.TrimPrefix(data, bom)
	for i, line := range strings.Split(string(data), "\n") {
		line = strings.TrimRight(line, "\r")
		if i > 0 && line == "---" {
			break
		}
		if re.MatchString(line) {
			return i + 1
		}
	}
	return 1
}

var bom = []byte{0xEF, 0xBB, 0xBF}
