// Package tree reads decision-tree routines: Lucid exports (a CSV export, or
// the JSON document contents of Lucid's REST API) become one Document of
// Nodes and Lines, which Compile checks and turns into a Tree of Steps with
// config.yml's tree: settings applied. The run engine (subpackage engine)
// walks that Tree; the driver (subpackage treedriver) runs the engine as a
// routine.
//
// # Import
//
// CSV columns are found by header name (their order does not matter): Id,
// Name, Line Source, Line Destination and Text Area 1 are required; Tags,
// Status, Comments, Shape Library and the rest of Lucid's columns are
// read when present. The row whose Name is Document gives the title, Page
// rows are skipped, Line rows are lines, and every other row is a node
// whose prompt is Text Area 1. Every column Lucid does not define is node
// metadata (key = header, empty cells skipped). In the JSON form, shapes
// are nodes (class, first text area, customData as metadata) and lines
// join endpoint1 to endpoint2; a line's label is its text. A CSV line's
// label is its Tags cell, else its Text Area 1.
//
// Tags are split on commas. NoValidation (any case, with or without _ or -)
// turns validation off; a tag naming a CLI codename (CLAUDE, CURSOR,
// GEMINI, COPILOT, QODO, AIDER or one added under tree.clis) runs the node
// with that CLI. Metadata keys (case, _ and - ignored): cli, validate_cli,
// retry_cli, retries, timeout (seconds, or a Go duration such as 90s),
// validate_prompt.
//
// # Shape of a tree, and where decree is stricter than the original
//
//   - The root is a Start terminator, else the one node without incoming
//     lines; several candidates are an error naming them.
//   - Start and End terminators mark the ends and are never sent to an AI.
//   - A node with one outgoing line is a step: it runs, is validated, and
//     its line is followed whatever its label. A node with several lines,
//     or a Decision shape with any, is a decision: the AI is told the route
//     labels and must answer one of them.
//   - Lines are kept as drawn: a node reached from two parents keeps both
//     incoming lines. Two lines out of one node with the same label (case
//     and surrounding space ignored), a line to an unknown id, a dangling
//     line, a cycle, an empty prompt, an unknown codename or a bad metadata
//     value are errors naming the node and its CSV row or JSON shape id.
//     Compile reports every problem at once.
package tree

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/decreehq/decree/pkg/config"
)

// Document is a chart as exported: nodes and lines in file order.
type Document struct {
	// File names the source in messages (its base name).
	File string
	// Title is the document's title (CSV Document row, JSON title).
	Title string
	// Nodes are the shapes, in file order.
	Nodes []*Node
	// Lines are the connectors, in file order.
	Lines []*Line
	byID  map[string]*Node
	// problems found while reading (duplicate ids, lines to unknown ids),
	// reported by Compile with the rest.
	problems []Problem
}

// Node is one shape of the chart.
type Node struct {
	// ID is the CSV Id or the JSON shape id.
	ID string
	// Where locates the node in its file: "row 4" (the CSV line number) or
	// "shape CXSt0TzudBZw".
	Where string
	// Shape is the shape's kind as Lucid names it: Process, Decision,
	// Terminator, Predefined process, ...
	Shape string
	// Text is the shape's main text: the prompt.
	Text string
	// Tags are the node's tags, split on commas, in order.
	Tags []string
	// Metadata holds every extra CSV column and JSON customData entry.
	Metadata map[string]string
	// In and Out are the lines ending and starting here, in file order.
	In, Out []*Line
}

// Line is a connector between two nodes.
type Line struct {
	// ID is the CSV Id or the JSON line id; Where locates it like Node.Where.
	ID, Where string
	// From and To are the ids the line connects.
	From, To string
	// Label is the route label ("" when the line has none).
	Label string
	// Src and Dst are the nodes From and To name (nil when unknown).
	Src, Dst *Node
}

// Label is a short human name of the node for messages:
// `node 4 (row 5) "Create three text files..."`.
func (n *Node) Label() string {
	return fmt.Sprintf("node %s (%s) %q", n.ID, n.Where, Abbrev(n.Text, 48))
}

// MetadataKeys returns the metadata keys, sorted.
func (n *Node) MetadataKeys() []string {
	keys := make([]string, 0, len(n.Metadata))
	for k := range n.Metadata {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// Abbrev shortens s to one line of at most max runes, with an ellipsis.
func Abbrev(s string, max int) string {
	s = strings.Join(strings.Fields(s), " ")
	r := []rune(s)
	if len(r) <= max {
		return s
	}
	return string(r[:max-1]) + "…"
}

// Parse reads a Lucid export: JSON when the name ends in .json (or the data
// starts with '{'), CSV otherwise. Problems that make the chart unreadable
// (missing columns, malformed CSV or JSON)
// are an *Error; problems of single rows (duplicate ids, lines to unknown
// ids) are kept and reported by Compile with every other problem.
func Parse(name string, data []byte) (*Document, error) {
	trimmed := strings.TrimLeft(string(data[:min(len(data), 64)]), "\ufeff \t\r\n")
	if strings.EqualFold(filepath.Ext(name), ".json") || strings.HasPrefix(trimmed, "{") {
		return ParseJSON(name, data)
	}
	return ParseCSV(name, data)
}

// Load reads the tree file at path and compiles it with settings.
func Load(path string, settings config.TreeSettings) (*Tree, error) {
	doc, err := readFile(path)
	if err != nil {
		return nil, err
	}
	return Compile(doc, settings)
}

// readFile reads and parses the tree file at path.
func readFile(path string) (*Document, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read decision tree: %w", err)
	}
	return Parse(filepath.Base(path), data)
}

// Lint reads and checks the tree file at path without a project's
// settings: everything Compile checks except whether CLI codenames are
// configured (the driver checks those with the project's tree: section).
func Lint(path string) (*Tree, error) {
	doc, err := readFile(path)
	if err != nil {
		return nil, err
	}
	return compile(doc, config.Default().Tree, false)
}

// Describe summarises the tree file at path for routine listings and the
// router: its title, size and first prompt.
func Describe(path string) (string, error) {
	t, err := Lint(path)
	if err != nil {
		return "", err
	}
	decisions := 0
	var first string
	for _, s := range t.Steps {
		if s.Kind == KindDecision {
			decisions++
		}
	}
	for s := t.Root; s != nil && first == ""; {
		if s.Kind == KindProcess || s.Kind == KindDecision {
			first = s.Text
		} else if len(s.Routes) > 0 {
			s = s.Routes[0].To
		} else {
			s = nil
		}
	}
	title := t.Doc.Title
	if title == "" {
		title = strings.TrimSuffix(t.Doc.File, filepath.Ext(t.Doc.File))
	}
	return fmt.Sprintf("Decision tree %q (%s, %s), starting with: %s", title, count(len(t.Steps), "node"), count(decisions, "decision"), Abbrev(first, 120)), nil
}

// count is "1 node", "2 nodes".
func count(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
