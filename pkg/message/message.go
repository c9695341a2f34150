// Package message parses and renders decree messages: markdown files with an
// optional YAML frontmatter block, as found in .decree/inbox/, the run
// directories and the spec files.
//
// # File format
//
// A file has frontmatter when its first line is exactly "---" (ended by LF,
// CRLF or the end of the file). The block ends at the next line that is
// exactly "---"; everything after that line is the body, kept byte for byte
// (it may be any bytes, binary included). Only the first block is
// frontmatter: later "---" lines belong to the body. A file that opens a
// block and never closes it is an error that names the opening line.
//
// A UTF-8 byte-order mark at the very start is skipped when a frontmatter
// block follows it (and is not written back by Render). Without a frontmatter
// block the BOM stays in the body like any other byte.
//
// The frontmatter must be a YAML mapping whose keys are scalars. Values are
// decoded to string, int, uint64 (integers above the int64 range), float64,
// bool, nil, []any and map[string]any (keys of nested mappings are taken as
// text). YAML timestamps stay strings. A merge key ("<<") at the top level is
// kept as an ordinary field named "<<".
//
// # Round trip
//
// Render is the inverse of Parse: for every message Parse returns,
// Parse(Render(m)) gives a message equal to m (see Equal). Render writes the
// frontmatter with LF line ends and its own YAML layout, so the bytes of the
// frontmatter may differ from the original file while meaning the same.
package message

import (
	"bufio"
	"bytes"
	"fmt"
	"math"
	"reflect"
	"strconv"
)

// Field is one frontmatter entry. Value holds one of the types listed in the
// package documentation.
type Field struct {
	Key   string
	Value any
}

// Message is a parsed decree message.
type Message struct {
	// Fields is the frontmatter, in file order.
	Fields []Field
	// Body is everything after the closing "---" line (or the whole file
	// when there is no frontmatter), byte for byte.
	Body []byte
	// HasFrontmatter reports whether the file had a frontmatter block (even
	// an empty one). Render always writes a block when Fields is not empty.
	HasFrontmatter bool
}

// ParseError reports a frontmatter problem at a 1-based line of the file.
type ParseError struct {
	Line int
	Msg  string
}

func (e *ParseError) Error() string {
	return fmt.Sprintf("frontmatter line %d: %s", e.Line, e.Msg)
}

var bom = []byte{0xEF, 0xBB, 0xBF}

// Parse splits data into frontmatter and body and decodes the frontmatter.
// Errors are *ParseError values carrying the line of the file.
func Parse(data []byte) (*Message, error) {
	m, n, err := readHead(bufio.NewReaderSize(bytes.NewReader(data), min(len(data)+16, 64<<10)), -1)
	if err != nil {
		return nil, err
	}
	m.Body = cloneBytes(data[n:])
	return m, nil
}

// delimiterLine reports whether b starts with a "---" line and returns its
// length including the line end.
func delimiterLine(b []byte) (int, bool) {
	if !bytes.HasPrefix(b, []byte("---")) {
		return 0, false
	}
	switch r := b[3:]; {
	case len(r) == 0:
		return 3, true
	case r[0] == '\n':
		return 4, true
	case len(r) >= 2 && r[0] == '\r' && r[1] == '\n':
		return 5, true
	}
	return 0, false
}

func cloneBytes(b []byte) []byte {
	if len(b) == 0 {
		return nil
	}
	return append([]byte(nil), b...)
}

// Render writes the message back as a file: a frontmatter block when the
// message has one or has fields, then the body. A message without
// frontmatter whose body itself starts with a "---" line gets an empty block
// in front, so that the body is not mistaken for frontmatter when read back.
func (m *Message) Render() []byte {
	var out bytes.Buffer
	_, _ = m.RenderTo(&out, bytes.NewReader(m.Body)) // writes to memory cannot fail
	return out.Bytes()
}

// Get returns the value of key.
func (m *Message) Get(key string) (any, bool) {
	for _, f := range m.Fields {
		if f.Key == key {
			return f.Value, true
		}
	}
	return nil, false
}

// GetString returns the value of key as text (see ParamValue); "" when the
// key is absent or null.
func (m *Message) GetString(key string) string {
	v, ok := m.Get(key)
	if !ok {
		return ""
	}
	return ParamValue(v)
}

// Set replaces the value of key in place, or appends the field. The value is
// normalised to the types Parse produces (other integer widths become int,
// float32 becomes float64, []string becomes []any, and so on).
func (m *Message) Set(key string, v any) {
	v = Normalise(v)
	for i := range m.Fields {
		if m.Fields[i].Key == key {
			m.Fields[i].Value = v
			return
		}
	}
	m.Fields = append(m.Fields, Field{Key: key, Value: v})
}

// Delete removes every field named key.
func (m *Message) Delete(key string) {
	out := m.Fields[:0]
	for _, f := range m.Fields {
		if f.Key != key {
			out = append(out, f)
		}
	}
	m.Fields = out
}

// Chain returns the chain field as text.
func (m *Message) Chain() string { return m.GetString("chain") }

// ID returns the id field as text.
func (m *Message) ID() string { return m.GetString("id") }

// Type returns the type field as text.
func (m *Message) Type() string { return m.GetString("type") }

// Routine returns the routine field as text.
func (m *Message) Routine() string { return m.GetString("routine") }

// InputFile returns the input_file field as text.
func (m *Message) InputFile() string { return m.GetString("input_file") }

// Seq returns the seq field when it is a non-negative whole number (written
// as a YAML integer or as digits in a string).
func (m *Message) Seq() (int, bool) {
	v, ok := m.Get("seq")
	if !ok {
		return 0, false
	}
	return asSeq(v)
}

func asSeq(v any) (int, bool) {
	switch x := v.(type) {
	case int:
		return x, x >= 0
	case string:
		if x == "" || len(x) > 9 {
			return 0, false
		}
		for _, r := range x {
			if r < '0' || r > '9' {
				return 0, false
			}
		}
		n, err := strconv.Atoi(x)
		return n, err == nil
	}
	return 0, false
}

// Clone returns a deep copy of m.
func (m *Message) Clone() *Message {
	c := &Message{HasFrontmatter: m.HasFrontmatter, Body: cloneBytes(m.Body)}
	if m.Fields != nil {
		c.Fields = make([]Field, len(m.Fields))
		for i, f := range m.Fields {
			c.Fields[i] = Field{Key: f.Key, Value: cloneValue(f.Value)}
		}
	}
	return c
}

func cloneValue(v any) any {
	switch x := v.(type) {
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = cloneValue(e)
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = cloneValue(e)
		}
		return out
	}
	return v
}

// Equal reports whether two messages hold the same frontmatter (keys in the
// same order, values of the same types and contents; NaN equals NaN, as the
// YAML text ".nan" reads back as NaN), the same body bytes and the same
// HasFrontmatter flag. A nil body equals an empty one.
func (m *Message) Equal(o *Message) bool {
	if m.HasFrontmatter != o.HasFrontmatter || !bytes.Equal(m.Body, o.Body) || len(m.Fields) != len(o.Fields) {
		return false
	}
	for i := range m.Fields {
		if m.Fields[i].Key != o.Fields[i].Key || !valueEqual(m.Fields[i].Value, o.Fields[i].Value) {
			return false
		}
	}
	return true
}

func valueEqual(a, b any) bool {
	switch x := a.(type) {
	case float64:
		y, ok := b.(float64)
		if !ok {
			return false
		}
		if math.IsNaN(x) && math.IsNaN(y) {
			return true
		}
		return x == y && math.Signbit(x) == math.Signbit(y)
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !valueEqual(x[i], y[i]) {
				return false
			}
		}
		return true
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, e := range x {
			f, ok := y[k]
			if !ok || !valueEqual(e, f) {
				return false
			}
		}
		return true
	}
	return reflect.DeepEqual(a, b)
}
