package config

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"reflect"
	"sort"
	"strconv"
	"strings"

	"github.com/decreehq/decree/pkg/fsutil"
	"go.yaml.in/yaml/v3"
)

// Registry keys of config.yml.
const (
	RoutinesKey       = "routines"
	SharedRoutinesKey = "shared_routines"
)

// WriteRegistry stores the routine registries in the config file at path,
// crash-safely. Only the routines: and shared_routines: blocks change; every
// other line of the file stays byte for byte. Inside a block, entries that
// remain keep their comments, their position and the spelling of their keys
// (max_attempts stays max_attempts); entries not in the maps are removed and
// new ones are appended in name order. An empty map leaves an absent key
// absent and writes an existing one as "{}". The file is created when
// missing. A file that is not valid YAML is left alone and reported.
func WriteRegistry(path string, routines, shared map[string]RoutineSettings) error {
	for _, reg := range []map[string]RoutineSettings{routines, shared} {
		for name := range reg {
			if err := fsutil.CheckName("routine", name); err != nil {
				return fmt.Errorf("write routine registry to %s: %w", path, err)
			}
		}
	}
	perm := fs.FileMode(0o644)
	data, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		data = nil
	case err != nil:
		return fmt.Errorf("write routine registry: read %s: %w", path, err)
	default:
		if st, err := os.Stat(path); err == nil {
			perm = st.Mode().Perm()
		}
	}
	out, err := spliceRegistry(data, routines, shared)
	if err != nil {
		return fmt.Errorf("write routine registry to %s: %w", path, err)
	}
	if err := checkRegistry(out, routines, shared); err != nil {
		return fmt.Errorf("write routine registry to %s: %w (file left unchanged)", path, err)
	}
	return fsutil.WriteFileAtomic(path, out, perm)
}

type regBlock struct {
	key     string
	entries map[string]RoutineSettings
}

// spliceRegistry returns data with the registry blocks replaced.
func spliceRegistry(data []byte, routines, shared map[string]RoutineSettings) ([]byte, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("the file is not valid YAML (%v); fix it first", err)
	}
	var root *yaml.Node
	if len(doc.Content) > 0 && !isNull(doc.Content[0]) {
		root = doc.Content[0]
		if root.Kind != yaml.MappingNode {
			return nil, fmt.Errorf("the file is not a mapping of settings; fix it first")
		}
	}
	blocks := []regBlock{{RoutinesKey, routines}, {SharedRoutinesKey, shared}}
	if root != nil && root.Style&yaml.FlowStyle != 0 {
		// A one-line {..} document has no lines to keep: edit and re-encode.
		for _, b := range blocks {
			if i := findKey(root, b.key); i >= 0 {
				root.Content[i+1] = mergeRegistry(root.Content[i+1], b.entries)
			} else if len(b.entries) > 0 {
				root.Content = append(root.Content, strNode(b.key), mergeRegistry(nil, b.entries))
			}
		}
		return encodeNode(root)
	}

	lines := bytes.SplitAfter(data, []byte("\n"))
	if len(lines) > 0 && len(lines[len(lines)-1]) == 0 {
		lines = lines[:len(lines)-1]
	}
	if root == nil && len(doc.Content) > 0 && doc.Content[0].Value != "" {
		// An explicit null document ("~" or "null"): drop that line so the
		// registry can follow the comments that remain.
		n := doc.Content[0]
		if n.Line < 1 || n.Line > len(lines) || string(bytes.TrimSpace(lines[n.Line-1])) != n.Value {
			return nil, fmt.Errorf("the file holds only %q; remove it first", n.Value)
		}
		lines = append(lines[:n.Line-1:n.Line-1], lines[n.Line:]...)
	}
	crlf := len(lines) > 0 && bytes.HasSuffix(lines[0], []byte("\r\n"))

	type edit struct {
		start, end int // 0-based line range [start, end) to replace
		text       []byte
	}
	var edits []edit
	var appendText []byte
	for _, b := range blocks {
		i := -1
		if root != nil {
			i = findKey(root, b.key)
		}
		if i < 0 {
			if len(b.entries) == 0 {
				continue
			}
			text, err := renderBlock(strNode(b.key), mergeRegistry(nil, b.entries))
			if err != nil {
				return nil, err
			}
			if root != nil && len(root.Content) > 0 && root.Content[0].Column > 1 {
				// Keys of an indented document go at the same indent.
				text = indent(text, root.Content[0].Column-1)
			}
			appendText = append(appendText, text...)
			continue
		}
		k := root.Content[i]
		start := k.Line - 1
		end := blockEnd(lines, maxLine(root.Content[i+1], k.Line, map[*yaml.Node]bool{})-1, k.Column-1)
		v := mergeRegistry(root.Content[i+1], b.entries)
		// yaml.v3 sometimes hangs a comment that sits below the block (at
		// the left margin) on a node inside it; such a comment stays where
		// it is in the file, so it must not be written into the block too.
		keepComments(v, commentLines(lines[start:end]))
		text, err := renderBlock(k, v)
		if err != nil {
			return nil, err
		}
		edits = append(edits, edit{start, end, text})
	}
	sort.Slice(edits, func(a, b int) bool { return edits[a].start > edits[b].start })
	for _, e := range edits {
		text := e.text
		if crlf {
			text = toCRLF(text)
		}
		repl := append([][]byte{}, lines[:e.start]...)
		repl = append(repl, text)
		lines = append(repl, lines[e.end:]...)
	}
	out := bytes.Join(lines, nil)
	if len(appendText) > 0 {
		if len(out) > 0 && !bytes.HasSuffix(out, []byte("\n")) {
			if crlf {
				out = append(out, '\r')
			}
			out = append(out, '\n')
		}
		if crlf {
			appendText = toCRLF(appendText)
		}
		out = append(out, appendText...)
	}
	return out, nil
}

// maxLine returns the last line on which a node of the subtree n starts.
func maxLine(n *yaml.Node, line int, seen map[*yaml.Node]bool) int {
	if n == nil || seen[n] {
		return line
	}
	seen[n] = true
	line = max(line, n.Line)
	for _, c := range n.Content {
		line = maxLine(c, line, seen)
	}
	return line
}

// blockEnd returns the end (exclusive, 0-based) of a block whose last node
// starts on line start (0-based) and whose key has the given indent: the
// lines after it that are blank or indented deeper, less trailing blank
// lines.
func blockEnd(lines [][]byte, start, indent int) int {
	end := start + 1
	last := end
	for ; end < len(lines); end++ {
		l := bytes.TrimRight(lines[end], "\r\n")
		trimmed := bytes.TrimLeft(l, " ")
		if len(bytes.TrimSpace(l)) == 0 {
			continue
		}
		if len(l)-len(trimmed) <= indent {
			break
		}
		last = end + 1
	}
	return last
}

func indent(b []byte, n int) []byte {
	pad := bytes.Repeat([]byte(" "), n)
	var out []byte
	for _, l := range bytes.SplitAfter(b, []byte("\n")) {
		if len(l) > 0 {
			out = append(append(out, pad...), l...)
		}
	}
	return out
}

func toCRLF(b []byte) []byte {
	return bytes.ReplaceAll(bytes.ReplaceAll(b, []byte("\r\n"), []byte("\n")), []byte("\n"), []byte("\r\n"))
}

// renderBlock encodes "key: value" as a one-key block mapping. Comments
// above and below the key stay in the file outside the block, so they are
// not written again.
func renderBlock(key, value *yaml.Node) ([]byte, error) {
	k := *key
	k.HeadComment, k.FootComment = "", ""
	m := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map", Content: []*yaml.Node{&k, value}}
	moveFlowLineComments(m)
	return encodeNode(m)
}

// moveFlowLineComments moves the line comment of a key whose value is
// written in flow style ({} or {a: 1}) onto the value: yaml.v3 would put the
// comment between them and produce "key: # c" followed by a stray "{}".
func moveFlowLineComments(n *yaml.Node) {
	if n.Kind == yaml.MappingNode {
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			flow := (v.Kind == yaml.MappingNode || v.Kind == yaml.SequenceNode) && (len(v.Content) == 0 || v.Style&yaml.FlowStyle != 0)
			if flow && k.LineComment != "" {
				if v.LineComment == "" {
					v.LineComment = k.LineComment
				} else {
					v.LineComment = k.LineComment + " " + v.LineComment
				}
				k.LineComment = ""
			}
		}
	}
	for _, c := range n.Content {
		moveFlowLineComments(c)
	}
}

// commentLines counts the full-line comments of a block of text.
func commentLines(lines [][]byte) map[string]int {
	m := map[string]int{}
	for _, l := range lines {
		t := string(bytes.TrimSpace(l))
		if len(t) > 0 && t[0] == '#' {
			m[t]++
		}
	}
	return m
}

// keepComments drops, from the head and foot comments of the nodes under n,
// every comment line that is not one of the block's own (each counted once).
func keepComments(n *yaml.Node, own map[string]int) {
	filter := func(c string) string {
		if c == "" {
			return c
		}
		var out []string
		for _, l := range strings.Split(c, "\n") {
			t := strings.TrimSpace(l)
			if t == "" {
				out = append(out, l)
				continue
			}
			if own[t] > 0 {
				own[t]--
				out = append(out, l)
			}
		}
		return strings.Trim(strings.Join(out, "\n"), "\n")
	}
	n.HeadComment = filter(n.HeadComment)
	for _, c := range n.Content {
		keepComments(c, own)
	}
	n.FootComment = filter(n.FootComment)
}

func encodeNode(n *yaml.Node) ([]byte, error) {
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(n); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func findKey(m *yaml.Node, key string) int {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return i
		}
	}
	return -1
}

func strNode(s string) *yaml.Node {
	return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: s}
}

// mergeRegistry updates an existing registry mapping (or builds a new one)
// to hold exactly entries.
func mergeRegistry(existing *yaml.Node, entries map[string]RoutineSettings) *yaml.Node {
	m := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
	if existing != nil && existing.Kind == yaml.MappingNode {
		m = existing
	} else if existing != nil {
		m.HeadComment, m.LineComment, m.FootComment = existing.HeadComment, existing.LineComment, existing.FootComment
	}
	done := map[string]bool{}
	var kept []*yaml.Node
	for i := 0; i+1 < len(m.Content); i += 2 {
		k, v := m.Content[i], m.Content[i+1]
		s, ok := entries[k.Value]
		if !ok || done[k.Value] {
			continue
		}
		done[k.Value] = true
		kept = append(kept, k, mergeEntry(v, s))
	}
	names := make([]string, 0, len(entries))
	for n := range entries {
		if !done[n] {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	for _, n := range names {
		kept = append(kept, strNode(n), mergeEntry(nil, entries[n]))
	}
	m.Content = kept
	return m
}

// mergeEntry updates one routine's mapping in place, keeping keys it does
// not manage and the comments of those it does.
func mergeEntry(existing *yaml.Node, s RoutineSettings) *yaml.Node {
	m := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
	if existing != nil && existing.Kind == yaml.MappingNode {
		m = existing
	} else if existing != nil {
		m.LineComment = existing.LineComment
	}
	set := func(key string, v *yaml.Node) {
		if i := findKey(m, key); i >= 0 {
			old := m.Content[i+1]
			v.HeadComment, v.LineComment, v.FootComment = old.HeadComment, old.LineComment, old.FootComment
			m.Content[i+1] = v
			return
		}
		m.Content = append(m.Content, strNode(key), v)
	}
	del := func(key string) {
		if i := findKey(m, key); i >= 0 {
			m.Content = append(m.Content[:i:i], m.Content[i+2:]...)
		}
	}
	boolNode := func(b bool) *yaml.Node {
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!bool", Value: strconv.FormatBool(b)}
	}
	intNode := func(n int) *yaml.Node {
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!int", Value: strconv.Itoa(n)}
	}
	if s.Enabled != nil {
		set("enabled", boolNode(*s.Enabled))
	} else {
		del("enabled")
	}
	if s.Deprecated {
		set("deprecated", boolNode(true))
	} else {
		del("deprecated")
	}
	retriesKey := "max_retries"
	if findKey(m, "max_retries") < 0 && findKey(m, "max_attempts") >= 0 {
		retriesKey = "max_attempts"
	}
	for _, k := range []string{"max_retries", "max_attempts"} {
		if k != retriesKey || s.MaxRetries <= 0 {
			del(k)
		}
	}
	if s.MaxRetries > 0 {
		set(retriesKey, intNode(s.MaxRetries))
	}
	if s.TimeoutS > 0 {
		set("timeout_s", intNode(s.TimeoutS))
	} else {
		del("timeout_s")
	}
	if len(s.Requires) > 0 {
		req := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
		labels := make([]string, 0, len(s.Requires))
		for l := range s.Requires {
			labels = append(labels, l)
		}
		sort.Strings(labels)
		for _, l := range labels {
			req.Content = append(req.Content, strNode(l), strNode(s.Requires[l]))
		}
		set("requires", req)
	} else {
		del("requires")
	}
	if s.MaxCostUSD > 0 {
		set("max_cost_usd", &yaml.Node{Kind: yaml.ScalarNode, Value: strconv.FormatFloat(s.MaxCostUSD, 'f', -1, 64)})
	} else {
		del("max_cost_usd")
	}
	if len(s.Attempts) > 0 {
		seq := &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq", Style: yaml.FlowStyle}
		for _, v := range s.Attempts {
			seq.Content = append(seq.Content, strNode(v))
		}
		set("attempts", seq)
	} else {
		del("attempts")
	}
	return m
}

// checkRegistry reads the registries back from out and compares them with
// what was meant to be written.
func checkRegistry(out []byte, routines, shared map[string]RoutineSettings) error {
	var doc yaml.Node
	if err := yaml.Unmarshal(out, &doc); err != nil {
		return fmt.Errorf("the rewritten file does not parse: %v", err)
	}
	p := &parser{file: "config"}
	got := map[string]map[string]RoutineSettings{RoutinesKey: {}, SharedRoutinesKey: {}}
	if len(doc.Content) > 0 && doc.Content[0].Kind == yaml.MappingNode {
		root := doc.Content[0]
		for key, into := range got {
			if i := findKey(root, key); i >= 0 {
				p.registry(root.Content[i+1], key, into)
			}
		}
	}
	if len(p.errs) > 0 {
		return fmt.Errorf("the rewritten registry is invalid: %w", errors.Join(p.errs...))
	}
	for key, want := range map[string]map[string]RoutineSettings{RoutinesKey: routines, SharedRoutinesKey: shared} {
		if !sameRegistry(got[key], want) {
			return fmt.Errorf("the rewritten %s block does not read back as written", key)
		}
	}
	return nil
}

func sameRegistry(a, b map[string]RoutineSettings) bool {
	if len(a) != len(b) {
		return false
	}
	for n, x := range a {
		y, ok := b[n]
		if !ok {
			return false
		}
		if len(x.Requires) == 0 && len(y.Requires) == 0 {
			x.Requires, y.Requires = nil, nil
		}
		if !reflect.DeepEqual(x, y) {
			return false
		}
	}
	return true
}
