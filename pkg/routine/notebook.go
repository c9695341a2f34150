package routine

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// notebook is the part of the nbformat 4 structure discovery reads.
type notebook struct {
	Cells []nbCell `json:"cells"`
}

type nbCell struct {
	CellType string          `json:"cell_type"`
	Metadata nbCellMeta      `json:"metadata"`
	Source   json.RawMessage `json:"source"`
}

type nbCellMeta struct {
	Tags []string `json:"tags"`
}

// CellSource returns a cell's source text: nbformat stores it either as one
// string or as a list of strings to be concatenated.
func CellSource(raw json.RawMessage) (string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s, nil
	}
	var parts []string
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", fmt.Errorf("cell source is neither a string nor a list of strings")
	}
	return strings.Join(parts, ""), nil
}

func parseNotebook(src []byte) (notebook, error) {
	var nb notebook
	if err := json.Unmarshal(src, &nb); err != nil {
		return nb, fmt.Errorf("not a valid notebook (JSON): %w; open it in Jupyter and save it again, or fix the JSON by hand", err)
	}
	return nb, nil
}

// NotebookDescription returns the content of the notebook's first markdown
// cell, trimmed; "" when it has none.
func NotebookDescription(src []byte) (string, error) {
	nb, err := parseNotebook(src)
	if err != nil {
		return "", err
	}
	for _, c := range nb.Cells {
		if c.CellType == "markdown" {
			s, err := CellSource(c.Source)
			if err != nil {
				return "", err
			}
			return strings.TrimSpace(s), nil
		}
	}
	return "", nil
}

// HasTag reports whether a cell's tags include tag.
func hasTag(tags []string, tag string) bool {
	for _, t := range tags {
		if t == tag {
			return true
		}
	}
	return false
}

var pyAssign = regexp.MustCompile(`^([A-Za-z_][A-Za-z0-9_]*)\s*(?::[^=]*)?=(.*)$`)

// NotebookParams returns the variables assigned in the notebook's first cell
// tagged "parameters" (standard ones included), in order. Each line of the
// form `name = value  # comment` (a type annotation is allowed) declares
// one; the default is recorded when value is a Python literal. A notebook
// without a parameters cell declares nothing.
func NotebookParams(src []byte) ([]Param, error) {
	nb, err := parseNotebook(src)
	if err != nil {
		return nil, err
	}
	for _, c := range nb.Cells {
		if c.CellType != "code" || !hasTag(c.Metadata.Tags, "parameters") {
			continue
		}
		s, err := CellSource(c.Source)
		if err != nil {
			return nil, err
		}
		return pythonParams(s), nil
	}
	return nil, nil
}

func pythonParams(src string) []Param {
	var out []Param
	seen := map[string]bool{}
	for _, l := range strings.Split(src, "\n") {
		l = strings.TrimSuffix(l, "\r")
		m := pyAssign.FindStringSubmatch(l)
		if m == nil || strings.HasPrefix(m[2], "=") {
			continue // not an assignment, or a comparison
		}
		name := m[1]
		if seen[name] {
			continue
		}
		seen[name] = true
		def, ok := pythonLiteral(stripPyComment(m[2]))
		out = append(out, Param{Name: name, Default: def, HasDefault: ok})
	}
	return out
}

// stripPyComment removes a trailing "# comment" outside string literals and
// surrounding space.
func stripPyComment(s string) string {
	var quote byte
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case quote != 0:
			if c == '\\' {
				i++
			} else if c == quote {
				quote = 0
			}
		case c == '\'' || c == '"':
			quote = c
		case c == '#':
			return strings.TrimSpace(s[:i])
		}
	}
	return strings.TrimSpace(s)
}

var pyNumber = regexp.MustCompile(`^[+-]?(\d[\d_]*(\.\d*)?|\.\d+)([eE][+-]?\d+)?j?$`)

// pythonLiteral decodes a simple Python literal: a string (with r/u prefix,
// single or double quotes) becomes its value; numbers, True, False, None
// and bracketed containers keep their source text. Anything else (a name,
// a call) is unknown.
func pythonLiteral(v string) (string, bool) {
	if v == "" {
		return "", false
	}
	switch v {
	case "True", "False", "None":
		return v, true
	}
	if pyNumber.MatchString(v) {
		return v, true
	}
	if s, ok := pythonString(v); ok {
		return s, true
	}
	if strings.ContainsAny(v[:1], "[({") {
		return v, true
	}
	return "", false
}

func pythonString(v string) (string, bool) {
	raw := false
	switch {
	case strings.HasPrefix(v, "r") || strings.HasPrefix(v, "R"):
		raw, v = true, v[1:]
	case strings.HasPrefix(v, "u") || strings.HasPrefix(v, "U"):
		v = v[1:]
	}
	if len(v) < 2 {
		return "", false
	}
	q := v[:1]
	if q != `"` && q != `'` {
		return "", false
	}
	if len(v) >= 6 && strings.HasPrefix(v, q+q+q) && strings.HasSuffix(v, q+q+q) {
		v = v[3 : len(v)-3]
	} else if strings.HasSuffix(v, q) {
		v = v[1 : len(v)-1]
	} else {
		return "", false
	}
	if raw {
		return v, true
	}
	return pyUnescape(v), true
}

func pyUnescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '\\' || i+1 >= len(s) {
			b.WriteByte(s[i])
			continue
		}
		i++
		switch c := s[i]; c {
		case 'n':
			b.WriteByte('\n')
		case 't':
			b.WriteByte('\t')
		case 'r':
			b.WriteByte('\r')
		case '0':
			b.WriteByte(0)
		case '\\', '\'', '"':
			b.WriteByte(c)
		case 'x', 'u', 'U':
			n := map[byte]int{'x': 2, 'u': 4, 'U': 8}[c]
			if i+1+n <= len(s) {
				if r, err := strconv.ParseUint(s[i+1:i+1+n], 16, 32); err == nil {
					b.WriteRune(rune(r))
					i += n
					continue
				}
			}
			b.WriteByte('\\')
			b.WriteByte(c)
		default:
			b.WriteByte('\\')
			b.WriteByte(c)
		}
	}
	return b.String()
}
