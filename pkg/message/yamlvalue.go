package message

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

var yamlLineRe = regexp.MustCompile(`line (\d+): `)

// decodeFrontmatter decodes the YAML between the delimiters. firstLine is the
// file line of the opening "---", so YAML line n is file line n+firstLine.
func decodeFrontmatter(src []byte, firstLine int) ([]Field, error) {
	dec := yaml.NewDecoder(bytes.NewReader(src))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, nil
		}
		return nil, yamlError(err, src, firstLine)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		if err != nil {
			return nil, yamlError(err, src, firstLine)
		}
		return nil, &ParseError{Line: extra.Line + firstLine, Msg: "the frontmatter holds a second YAML document; keep one mapping between the '---' lines"}
	}
	if len(doc.Content) == 0 {
		return nil, nil
	}
	root := doc.Content[0]
	if root.Kind == yaml.ScalarNode && root.ShortTag() == "!!null" {
		return nil, nil
	}
	if root.Kind != yaml.MappingNode {
		return nil, &ParseError{Line: root.Line + firstLine, Msg: fmt.Sprintf("the frontmatter must be a mapping of keys to values, found %s", kindName(root))}
	}
	fields := make([]Field, 0, len(root.Content)/2)
	seen := make(map[string]int, len(root.Content)/2)
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := root.Content[i], root.Content[i+1]
		line := k.Line + firstLine
		if k.Kind != yaml.ScalarNode {
			return nil, &ParseError{Line: line, Msg: fmt.Sprintf("a frontmatter key must be plain text, found %s", kindName(k))}
		}
		key := k.Value
		if k.ShortTag() == "!!binary" {
			// Keys that are not valid UTF-8 are written base64-encoded.
			if err := k.Decode(&key); err != nil {
				return nil, yamlError(err, nil, firstLine)
			}
		}
		if prev, dup := seen[key]; dup {
			return nil, &ParseError{Line: line, Msg: fmt.Sprintf("key %q repeats the one on line %d; keep one", key, prev)}
		}
		seen[key] = line
		keepTimestampsAsText(v, map[*yaml.Node]bool{})
		var raw any
		if err := v.Decode(&raw); err != nil {
			return nil, yamlError(err, nil, firstLine)
		}
		val, err := normalise(raw, true)
		if err != nil {
			return nil, &ParseError{Line: v.Line + firstLine, Msg: fmt.Sprintf("key %q: %v", key, err)}
		}
		fields = append(fields, Field{Key: key, Value: val})
	}
	return fields, nil
}

// yamlError turns a yaml.v3 error into a ParseError with a file line.
// yaml.v3 numbers lines inconsistently (scanner errors from 1, parser errors
// from 0, the first line not at all), so for syntax errors the line is found
// by parsing growing prefixes of the YAML: the problem is on the first line
// after the longest prefix that still parses.
func yamlError(err error, src []byte, firstLine int) error {
	msg := err.Error()
	msg = strings.TrimPrefix(msg, "yaml: ")
	msg = strings.TrimPrefix(msg, "unmarshal errors:\n")
	msg = strings.TrimSpace(msg)
	line := firstLine + 1 // yaml.v3 leaves the line out for its first line
	if m := yamlLineRe.FindStringSubmatchIndex(msg); m != nil {
		n, _ := strconv.Atoi(msg[m[2]:m[3]])
		line = n + firstLine
		msg = msg[:m[0]] + msg[m[1]:]
	}
	if src != nil {
		if n, ok := syntaxErrorLine(src); ok {
			line = n + firstLine
		}
	}
	msg = atLineRe.ReplaceAllStringFunc(msg, func(s string) string {
		n, _ := strconv.Atoi(strings.TrimPrefix(s, "at line "))
		return "at line " + strconv.Itoa(n+firstLine)
	})
	return &ParseError{Line: line, Msg: "invalid YAML: " + msg}
}

var atLineRe = regexp.MustCompile(`at line \d+`)

// maxPrefixScanLines bounds the quadratic prefix scan of syntaxErrorLine.
const maxPrefixScanLines = 400

// syntaxErrorLine returns the 1-based line of the YAML on which a syntax
// error starts: one past the longest line prefix that parses
// (a prefix may fail and a longer one parse again, as in a flow list that
// spans lines).
func syntaxErrorLine(src []byte) (int, bool) {
	lines := bytes.SplitAfter(src, []byte("\n"))
	if len(lines) > maxPrefixScanLines {
		return 0, false
	}
	end, lastGood := 0, 0
	for i, l := range lines {
		end += len(l)
		if parseAll(src[:end]) == nil {
			lastGood = i + 1
		}
	}
	if lastGood >= len(lines) {
		return 0, false
	}
	return lastGood + 1, true
}

// parseAll parses every YAML document in src and returns the first error.
func parseAll(src []byte) error {
	dec := yaml.NewDecoder(bytes.NewReader(src))
	for {
		var n yaml.Node
		if err := dec.Decode(&n); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
	}
}

// keepTimestampsAsText retags plain scalars that YAML would read as
// timestamps as strings, so that "date: 2025-01-01" stays the text the user
// wrote instead of becoming a time value.
func keepTimestampsAsText(n *yaml.Node, seen map[*yaml.Node]bool) {
	if n == nil || seen[n] {
		return
	}
	seen[n] = true
	if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!timestamp" {
		n.Tag = "!!str"
	}
	for _, c := range n.Content {
		keepTimestampsAsText(c, seen)
	}
	keepTimestampsAsText(n.Alias, seen)
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.SequenceNode:
		return "a list"
	case yaml.MappingNode:
		return "a mapping"
	case yaml.AliasNode:
		return "an alias"
	case yaml.ScalarNode:
		return fmt.Sprintf("the value %q", n.Value)
	}
	return "something else"
}

// Normalise converts v to the value types Parse produces: integers to int
// (uint64 above the int range), float32 to float64, []byte to string, slices
// to []any and maps to map[string]any (keys as text). Other types are
// returned unchanged.
func Normalise(v any) any {
	out, _ := normalise(v, false)
	return out
}

func normalise(v any, strict bool) (any, error) {
	switch x := v.(type) {
	case nil, string, bool, float64, int:
		return x, nil
	case int8:
		return int(x), nil
	case int16:
		return int(x), nil
	case int32:
		return int(x), nil
	case int64:
		return int(x), nil
	case uint8:
		return int(x), nil
	case uint16:
		return int(x), nil
	case uint32:
		return int(x), nil
	case uint:
		if uint64(x) > math.MaxInt {
			return uint64(x), nil
		}
		return int(x), nil
	case uint64:
		if x > math.MaxInt {
			return x, nil
		}
		return int(x), nil
	case float32:
		return float64(x), nil
	case []byte:
		return string(x), nil
	case []string:
		out := make([]any, len(x))
		for i, s := range x {
			out[i] = s
		}
		return out, nil
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			n, err := normalise(e, strict)
			if err != nil {
				return nil, err
			}
			out[i] = n
		}
		return out, nil
	case map[string]string:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = e
		}
		return out, nil
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			n, err := normalise(e, strict)
			if err != nil {
				return nil, err
			}
			out[k] = n
		}
		return out, nil
	case map[any]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			ks, err := keyText(k)
			if err != nil {
				return nil, err
			}
			if _, dup := out[ks]; dup && strict {
				return nil, fmt.Errorf("nested key %q appears twice once read as text; rename one", ks)
			}
			n, err := normalise(e, strict)
			if err != nil {
				return nil, err
			}
			out[ks] = n
		}
		return out, nil
	}
	return v, nil
}

func keyText(k any) (string, error) {
	switch x := k.(type) {
	case nil:
		return "null", nil
	case string, bool, int, int64, uint64, float64:
		return ParamValue(x), nil
	}
	return "", fmt.Errorf("nested keys must be plain text, found %T", k)
}

// ParamValue renders a frontmatter value as the text a routine receives:
// scalars as their text (nil as ""), lists and mappings as compact JSON.
func ParamValue(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		return x
	case bool:
		return strconv.FormatBool(x)
	case int:
		return strconv.Itoa(x)
	case int64:
		return strconv.FormatInt(x, 10)
	case uint64:
		return strconv.FormatUint(x, 10)
	case float64:
		return formatFloat(x)
	case float32:
		return formatFloat(float64(x))
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(jsonSafe(Normalise(v))); err != nil {
		return fmt.Sprint(v)
	}
	return strings.TrimSuffix(buf.String(), "\n")
}

// jsonSafe replaces floats JSON cannot hold (NaN, ±Inf) by their YAML text.
func jsonSafe(v any) any {
	switch x := v.(type) {
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return formatFloat(x)
		}
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = jsonSafe(e)
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = jsonSafe(e)
		}
		return out
	}
	return v
}

// formatFloat writes f so that YAML reads it back as the same float: always
// with a '.', an exponent or a special spelling, never as an integer.
func formatFloat(f float64) string {
	switch {
	case math.IsNaN(f):
		return ".nan"
	case math.IsInf(f, 1):
		return ".inf"
	case math.IsInf(f, -1):
		return "-.inf"
	}
	s := strconv.FormatFloat(f, 'g', -1, 64)
	if !strings.ContainsAny(s, ".e") {
		s += ".0"
	}
	return s
}

// encodeFields renders fields as a YAML block mapping ending in a newline,
// or nothing when there are no fields.
func encodeFields(fields []Field) []byte {
	if len(fields) == 0 {
		return nil
	}
	root := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
	for _, f := range fields {
		root.Content = append(root.Content, stringNode(f.Key), valueNode(f.Value, 0))
	}
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(root); err != nil {
		// Only reachable with exotic values; fall back to text per field.
		buf.Reset()
		for _, f := range fields {
			fmt.Fprintf(&buf, "%s: %s\n", strconv.Quote(f.Key), strconv.Quote(fmt.Sprint(f.Value)))
		}
		return buf.Bytes()
	}
	_ = enc.Close()
	return buf.Bytes()
}

// stringNode encodes s the way yaml.v3 chooses (plain, quoted, literal
// block, or !!binary for invalid UTF-8), except that text holding a Unicode
// line or paragraph separator or a NEL is double-quoted: yaml.v3 writes those
// characters raw in other styles and then reads them as line breaks.
func stringNode(s string) *yaml.Node {
	var n yaml.Node
	if err := n.Encode(s); err != nil {
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: s, Style: yaml.DoubleQuotedStyle}
	}
	if n.ShortTag() == "!!str" && strings.ContainsAny(s, "\u2028\u2029\u0085") {
		n.Style = yaml.DoubleQuotedStyle
	}
	return &n
}

const maxRenderDepth = 1000

func valueNode(v any, depth int) *yaml.Node {
	if depth > maxRenderDepth {
		return stringNode(fmt.Sprint(v))
	}
	switch x := Normalise(v).(type) {
	case nil:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!null", Value: "null"}
	case string:
		return stringNode(x)
	case bool:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!bool", Value: strconv.FormatBool(x)}
	case int:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!int", Value: strconv.Itoa(x)}
	case uint64:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!int", Value: strconv.FormatUint(x, 10)}
	case float64:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!float", Value: formatFloat(x)}
	case []any:
		n := &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq"}
		for _, e := range x {
			n.Content = append(n.Content, valueNode(e, depth+1))
		}
		return n
	case map[string]any:
		n := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			n.Content = append(n.Content, stringNode(k), valueNode(x[k], depth+1))
		}
		return n
	default:
		var n yaml.Node
		if err := n.Encode(x); err != nil {
			return stringNode(fmt.Sprint(x))
		}
		return &n
	}
}
