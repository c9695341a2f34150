package notebook

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/big"
	"regexp"
	"strings"

	"github.com/decreehq/decree/pkg/routine"
)

// InjectParameters returns the notebook with a code cell tagged
// "injected-parameters" assigning params, the way papermill does it: the
// cell goes right after the first cell tagged "parameters", or at the top
// when there is none (papermill's behaviour too), and any earlier
// injected-parameters cell is removed. Values are typed like papermill's
// -p: "True", "False", "None", integers and decimal floats become Python
// values, everything else a str literal.
func InjectParameters(src []byte, params map[string]string) ([]byte, error) {
	var nb map[string]any
	dec := json.NewDecoder(bytes.NewReader(src))
	dec.UseNumber()
	if err := dec.Decode(&nb); err != nil {
		return nil, fmt.Errorf("not a valid notebook (JSON): %w", err)
	}
	rawCells, ok := nb["cells"].([]any)
	if !ok {
		return nil, fmt.Errorf("not a notebook: no \"cells\" list")
	}
	cells := make([]any, 0, len(rawCells)+1)
	at := 0
	for _, c := range rawCells {
		cell, ok := c.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("not a notebook: a cell is not an object")
		}
		if cellHasTag(cell, "injected-parameters") {
			continue
		}
		cells = append(cells, cell)
		if at == 0 && cellHasTag(cell, "parameters") {
			at = len(cells)
		}
	}
	var code strings.Builder
	code.WriteString("# Parameters\n")
	for _, k := range routine.OrderedParams(params) {
		fmt.Fprintf(&code, "%s = %s\n", k, PythonValue(params[k]))
	}
	injected := map[string]any{
		"cell_type":       "code",
		"execution_count": nil,
		"metadata":        map[string]any{"tags": []any{"injected-parameters"}},
		"outputs":         []any{},
		"source":          code.String(),
	}
	cells = append(cells[:at], append([]any{injected}, cells[at:]...)...)
	if wantsCellIDs(nb) {
		// nbformat 4.5 requires an id on every cell; Jupyter warns about
		// each missing one (and will refuse them), so fill the gaps.
		taken := map[string]bool{}
		for _, c := range cells {
			if id, ok := c.(map[string]any)["id"].(string); ok {
				taken[id] = true
			}
		}
		for _, c := range cells {
			cell := c.(map[string]any)
			if _, ok := cell["id"].(string); ok {
				continue
			}
			for {
				var b [4]byte
				_, _ = rand.Read(b[:])
				if id := hex.EncodeToString(b[:]); !taken[id] {
					cell["id"], taken[id] = id, true
					break
				}
			}
		}
	}
	nb["cells"] = cells
	out, err := json.MarshalIndent(nb, "", " ")
	if err != nil {
		return nil, fmt.Errorf("encode notebook: %w", err)
	}
	return append(out, '\n'), nil
}

// wantsCellIDs reports whether the notebook's format version (4.5 and later)
// requires cell ids.
func wantsCellIDs(nb map[string]any) bool {
	num := func(key string) int64 {
		n, _ := nb[key].(json.Number)
		v, _ := n.Int64()
		return v
	}
	major, minor := num("nbformat"), num("nbformat_minor")
	return major > 4 || (major == 4 && minor >= 5)
}

func cellHasTag(cell map[string]any, tag string) bool {
	md, _ := cell["metadata"].(map[string]any)
	tags, _ := md["tags"].([]any)
	for _, t := range tags {
		if t == tag {
			return true
		}
	}
	return false
}

var (
	intRe   = regexp.MustCompile(`^[+-]?[0-9]+$`)
	floatRe = regexp.MustCompile(`^[+-]?([0-9]+\.[0-9]*|\.[0-9]+|[0-9]+)([eE][+-]?[0-9]+)?$`)
)

// PythonValue renders a parameter value as Python source, typed the way
// papermill types -p values.
func PythonValue(v string) string {
	switch v {
	case "True", "False", "None":
		return v
	}
	if intRe.MatchString(v) {
		n, ok := new(big.Int).SetString(v, 10)
		if ok {
			return n.String() // canonical: "007" is not valid Python
		}
	}
	if floatRe.MatchString(v) {
		return v
	}
	return PythonString(v)
}

// PythonString renders s as a double-quoted Python str literal. Invalid
// UTF-8 bytes become U+FFFD.
func PythonString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range strings.ToValidUTF8(s, "\uFFFD") {
		switch {
		case r == '"':
			b.WriteString(`\"`)
		case r == '\\':
			b.WriteString(`\\`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\x%02x`, r)
		case r == 0x2028 || r == 0x2029 || r == 0x85:
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}
