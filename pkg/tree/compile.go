package tree

import (
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/decreehq/decree/pkg/config"
)

// Kind is what a step does when the tree runs.
type Kind string

// Step kinds.
const (
	// KindStart is a Start terminator: not sent to an AI, just followed.
	KindStart Kind = "start"
	// KindEnd is an End terminator: the walk ends there.
	KindEnd Kind = "end"
	// KindProcess runs a prompt and follows its one line, if any.
	KindProcess Kind = "process"
	// KindDecision runs a prompt that must answer one of its routes.
	KindDecision Kind = "decision"
	// KindAsk (a node tagged "ask") asks a person: its text is the
	// question, its route labels the options. The walk ends there (the
	// message waits for a reply) and the next attempt goes on along the
	// route the reply names (or one labelled timed_out).
	KindAsk Kind = "ask"
)

// Tree is a compiled chart: every node as a Step with settings applied.
type Tree struct {
	Doc *Document
	// Root is where a run starts.
	Root *Step
	// Steps are all nodes, in file order.
	Steps []*Step
	// Warnings are problems that do not stop a run (nodes no path
	// reaches).
	Warnings []Problem
	// Settings are the settings the steps were compiled with.
	Settings config.TreeSettings
}

// Step is a node ready to run.
type Step struct {
	*Node
	Kind Kind
	// Prompt is the node's text (placeholders not yet filled).
	Prompt string
	// ValidatePrompt is the validation prompt; "" means not validated.
	ValidatePrompt string
	// CLI, ValidateCLI and RetryCLI are codenames of Settings.CLIs.
	CLI, ValidateCLI, RetryCLI string
	// Retries is how often a failed validation is retried.
	Retries int
	// Timeout caps each CLI call of this step.
	Timeout time.Duration
	// Routes are the outgoing lines, in file order.
	Routes []Route
}

// Route is an outgoing line of a step.
type Route struct {
	Label string
	Line  *Line
	To    *Step
}

// Labels returns the route labels.
func (s *Step) Labels() []string {
	out := make([]string, len(s.Routes))
	for i, r := range s.Routes {
		out[i] = r.Label
	}
	return out
}

// Match returns the route an answer chooses: the label equal to it, else
// the one equal when trimmed and compared without case.
func (s *Step) Match(answer string) (Route, bool) {
	for _, r := range s.Routes {
		if r.Label == answer {
			return r, true
		}
	}
	for _, r := range s.Routes {
		if strings.EqualFold(strings.TrimSpace(r.Label), strings.TrimSpace(answer)) {
			return r, true
		}
	}
	return Route{}, false
}

// Placeholders are the names a prompt may use as {{name}}: the message body
// and decree's standard routine parameters.
var Placeholders = []string{"message", "message_file", "spec_file", "message_id", "message_dir", "chain", "seq"}

// PlaceholderRe matches a {{name}} placeholder.
var PlaceholderRe = regexp.MustCompile(`\{\{\s*([A-Za-z_][A-Za-z0-9_.-]*)\s*\}\}`)

// DefaultValidatePrompt asks the validating CLI to judge a step's work.
const DefaultValidatePrompt = `You are checking the work of another AI agent. Below are the task it was given and its answer. ` +
	`Inspect the project as needed and judge whether the task was done completely and correctly. ` +
	`Set fully_completed only if nothing is missing; list what is missing or wrong in warnings.`

// metadata keys, normalised (lower case, no '_', '-' or spaces).
const (
	metaCLI            = "cli"
	metaValidateCLI    = "validatecli"
	metaRetryCLI       = "retrycli"
	metaRetries        = "retries"
	metaTimeout        = "timeout"
	metaValidatePrompt = "validateprompt"
)

// normKey lower-cases a key or tag and drops '_', '-' and spaces, so
// validate_prompt, validatePrompt and Validate-Prompt are one key.
func normKey(s string) string {
	return strings.Map(func(r rune) rune {
		switch r {
		case '_', '-', ' ':
			return -1
		}
		return r
	}, strings.ToLower(s))
}

// meta returns the node's metadata value for a normalised key.
func (n *Node) meta(key string) (string, bool) {
	for _, k := range n.MetadataKeys() {
		if normKey(k) == key {
			return n.Metadata[k], true
		}
	}
	return "", false
}

// Compile checks doc's shape (root, cycles, routes, prompts) and applies
// settings to every node. It reports every problem at once as an *Error.
func Compile(doc *Document, settings config.TreeSettings) (*Tree, error) {
	return compile(doc, settings, true)
}

func compile(doc *Document, settings config.TreeSettings, strictCodes bool) (*Tree, error) {
	ps := &problems{file: doc.File, list: append([]Problem(nil), doc.problems...)}
	t := &Tree{Doc: doc, Settings: settings}
	steps := map[*Node]*Step{}
	for _, n := range doc.Nodes {
		s := compileStep(n, settings, strictCodes, ps)
		steps[n] = s
		t.Steps = append(t.Steps, s)
	}
	for _, s := range t.Steps {
		for _, l := range s.Out {
			s.Routes = append(s.Routes, Route{Label: l.Label, Line: l, To: steps[l.Dst]})
		}
		checkRoutes(s, ps)
	}
	if len(t.Steps) == 0 {
		ps.add("", "the chart has no shapes")
		return nil, ps.err()
	}
	checkCycles(t, ps)
	t.Root = findRoot(t, ps)
	if t.Root != nil {
		reached := map[*Step]bool{}
		var walk func(s *Step)
		walk = func(s *Step) {
			if reached[s] {
				return
			}
			reached[s] = true
			for _, r := range s.Routes {
				walk(r.To)
			}
		}
		walk(t.Root)
		for _, s := range t.Steps {
			if !reached[s] {
				t.Warnings = append(t.Warnings, Problem{Where: s.Label(), Msg: "no path from the start reaches this node; it never runs"})
			}
		}
	}
	if err := ps.err(); err != nil {
		return nil, err
	}
	return t, nil
}

// kindOf classifies a node by its shape, tags and lines.
func kindOf(n *Node) Kind {
	for _, tag := range n.Tags {
		if normKey(tag) == "ask" {
			return KindAsk
		}
	}
	shape := normKey(strings.TrimSuffix(n.Shape, "Block"))
	if shape == "terminator" {
		switch strings.ToLower(strings.TrimSpace(n.Text)) {
		case "start":
			return KindStart
		case "end":
			return KindEnd
		}
	}
	if len(n.Out) >= 2 || (shape == "decision" && len(n.Out) >= 1) {
		return KindDecision
	}
	return KindProcess
}

func compileStep(n *Node, set config.TreeSettings, strictCodes bool, ps *problems) *Step {
	s := &Step{Node: n, Kind: kindOf(n), Prompt: n.Text, CLI: set.DefaultCLI, ValidateCLI: set.ValidateCLI,
		RetryCLI: set.RetryCLI, Retries: set.RetryCount, Timeout: time.Duration(set.TimeoutS) * time.Second}
	where := n.Label()
	switch s.Kind {
	case KindStart:
		if len(n.Out) != 1 {
			ps.add(where, "a Start terminator needs exactly one outgoing line, it has %d", len(n.Out))
		}
		return s
	case KindEnd:
		if len(n.Out) > 0 {
			ps.add(where, "an End terminator cannot have outgoing lines (it has %d)", len(n.Out))
		}
		return s
	}
	if strings.TrimSpace(n.Text) == "" {
		ps.add(where, "the prompt (the shape's text) is empty; write what the AI should do")
	}
	if s.Kind == KindAsk {
		if len(n.Out) == 0 {
			ps.add(where, "an ask node needs one labelled line out per option (yes, no, ...)")
		}
		if v, ok := n.meta(metaTimeout); ok {
			if d, err := parseTimeout(v); err != nil {
				ps.add(where, "metadata timeout: got %q, want seconds (e.g. 300) or a duration (e.g. 24h)", v)
			} else {
				s.Timeout = d
			}
		} else {
			s.Timeout = 0 // no deadline unless the node gives one
		}
		return s
	}
	for _, m := range PlaceholderRe.FindAllStringSubmatch(n.Text, -1) {
		if !slices.Contains(Placeholders, m[1]) {
			ps.add(where, "unknown placeholder %s; prompts may use {{%s}}", m[0], strings.Join(Placeholders, "}}, {{"))
		}
	}
	noValidation := false
	var tagCLI string
	for _, tag := range n.Tags {
		if normKey(tag) == "novalidation" {
			noValidation = true
			continue
		}
		code := strings.ToUpper(tag)
		if _, ok := set.CLIs[code]; !ok {
			continue // another tag: kept, not interpreted
		}
		if tagCLI != "" && tagCLI != code {
			ps.add(where, "tags name two CLIs, %s and %s; keep one", tagCLI, code)
		}
		tagCLI = code
	}
	if tagCLI != "" {
		s.CLI = tagCLI
	}
	codename := func(key, label string, dst *string) {
		v, ok := n.meta(key)
		if !ok {
			return
		}
		code := strings.ToUpper(strings.TrimSpace(v))
		if _, known := set.CLIs[code]; !known {
			if !strictCodes {
				return
			}
			ps.add(where, "metadata %s: unknown CLI codename %q; known: %s (add others under tree.clis in .decree/config.yml)", label, v, strings.Join(codenames(set), ", "))
			return
		}
		*dst = code
	}
	codename(metaCLI, "cli", &s.CLI)
	if v, ok := n.meta(metaCLI); ok && tagCLI != "" && !strings.EqualFold(strings.TrimSpace(v), tagCLI) {
		ps.add(where, "tag %s and metadata cli=%s name different CLIs; keep one", tagCLI, v)
	}
	codename(metaValidateCLI, "validate_cli", &s.ValidateCLI)
	codename(metaRetryCLI, "retry_cli", &s.RetryCLI)
	if v, ok := n.meta(metaRetries); ok {
		r, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || r < 0 {
			ps.add(where, "metadata retries: got %q, want a whole number, 0 or more", v)
		} else {
			s.Retries = r
		}
	}
	if v, ok := n.meta(metaTimeout); ok {
		d, err := parseTimeout(v)
		switch {
		case err != nil:
			ps.add(where, "metadata timeout: got %q, want seconds (e.g. 300) or a duration (e.g. 5m)", v)
		case d > 0:
			s.Timeout = d
		}
	}
	vp, hasVP := n.meta(metaValidatePrompt)
	switch {
	case noValidation:
	case hasVP && strings.TrimSpace(vp) != "":
		s.ValidatePrompt = strings.TrimSpace(vp)
	case s.Kind == KindProcess:
		s.ValidatePrompt = DefaultValidatePrompt
	}
	return s
}

// parseTimeout reads whole seconds or a Go duration; 0 means the default.
func parseTimeout(v string) (time.Duration, error) {
	v = strings.TrimSpace(v)
	if n, err := strconv.Atoi(v); err == nil {
		if n < 0 {
			return 0, fmt.Errorf("negative")
		}
		return time.Duration(n) * time.Second, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("bad duration")
	}
	return d, nil
}

func codenames(set config.TreeSettings) []string {
	out := make([]string, 0, len(set.CLIs))
	for c := range set.CLIs {
		out = append(out, c)
	}
	sort.Strings(out)
	return out
}
