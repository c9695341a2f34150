package tree

import (
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/decreehq/decree/pkg/config"
)

const header = "Id,Name,Shape Library,Page ID,Line Source,Line Destination,Tags,Status,Text Area 1,Comments"

// chart builds a CSV export from rows after the standard header (row 2 is
// the first data row).
func chart(rows ...string) chartBytes {
	return chartBytes(header + "\n1,Document,,,,,,,Test chart,\n2,Page,,,,,,,Page 1,\n" + strings.Join(rows, "\n") + "\n")
}

func compileCSV(t *testing.T, data []byte) (*Tree, error) {
	t.Helper()
	doc, err := Parse("t.tree.csv", data)
	if err != nil {
		return nil, err
	}
	return Compile(doc, config.Default().Tree)
}

func mustCompile(t *testing.T, data []byte) *Tree {
	t.Helper()
	tr, err := compileCSV(t, data)
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

func step(t *testing.T, tr *Tree, id string) *Step {
	t.Helper()
	for _, s := range tr.Steps {
		if s.ID == id {
			return s
		}
	}
	t.Fatalf("no node %s", id)
	return nil
}

// TestBadInput: every problem is reported, each naming the node or line
// and its row.
func TestBadInput(t *testing.T) {
	cases := []struct {
		name string
		data []byte
		want []string
	}{
		{"missing columns", []byte("Id,Name,Text Area 1\n1,Process,x\n"),
			[]string{"missing column(s) Line Source, Line Destination"}},
		{"empty file", []byte(""), []string{"the file is empty"}},
		{"line to unknown id", chart("3,Process,,,,,,,do it,", "4,Line,,,3,99,,,,"),
			[]string{`line 4 (row 5): the line's destination 99 is not a shape of this chart`}},
		{"dangling line", chart("3,Process,,,,,,,do it,", "4,Line,,,3,,,,,"),
			[]string{`line 4 (row 5): the line has no destination (it dangles)`}},
		{"duplicate id", chart("3,Process,,,,,,,a,", "3,Process,,,,,,,b,"),
			[]string{"row 5: id 3 is used again (first at row 4)"}},
		{"cycle", chart("3,Terminator,,,,,,,Start,", "4,Process,,,,,,,a,", "5,Process,,,,,,,b,", "6,Line,,,3,4,,,,", "7,Line,,,4,5,,,,", "8,Line,,,5,4,,,,"),
			[]string{`the lines form a cycle: 4 (row 5) -> 5 (row 6) -> 4`}},
		{"empty prompt", chart("3,Process,,,,,,,,"),
			[]string{`node 3 (row 4) "": the prompt (the shape's text) is empty`}},
		{"unknown codename", chart("3,Process,,,,,,,do it,").withColumn("cli", "CHATGPT"),
			[]string{`node 3 (row 4) "do it": metadata cli: unknown CLI codename "CHATGPT"; known: AIDER, CLAUDE, COPILOT, CURSOR, GEMINI, QODO`}},
		{"bad retries and timeout", chart("3,Process,,,,,,,do it,").withColumns(map[string]string{"retries": "-1", "timeout": "soon"}),
			[]string{"metadata retries: got \"-1\"", "metadata timeout: got \"soon\""}},
		{"duplicate route labels", chart("3,Decision,,,,,,,ok?,", "4,Process,,,,,,,a,", "5,Process,,,,,,,b,", "6,Line,,,3,4,,,Yes,", "7,Line,,,3,5,,,yes ,"),
			[]string{`node 3 (row 4) "ok?": line 6 (row 7) and line 7 (row 8) both have the route label "yes"`}},
		{"unlabeled decision line", chart("3,Decision,,,,,,,ok?,", "4,Process,,,,,,,a,", "5,Process,,,,,,,b,", "6,Line,,,3,4,,,Yes,", "7,Line,,,3,5,,,,"),
			[]string{`line 7 (row 8) has no label`}},
		{"ambiguous root", chart("3,Process,,,,,,,a,", "4,Process,,,,,,,b,"),
			[]string{`the start is ambiguous: 2 nodes have no incoming line: node 3 (row 4) "a", node 4 (row 5) "b"; add a Start terminator`}},
		{"two starts", chart("3,Terminator,,,,,,,Start,", "4,Terminator,,,,,,,start,", "5,Process,,,,,,,a,", "6,Line,,,3,5,,,,", "7,Line,,,4,5,,,,"),
			[]string{`several Start terminators: node 3 (row 4) "Start", node 4 (row 5) "start"`}},
		{"unknown placeholder", chart("3,Process,,,,,,,read {{mesage}},"),
			[]string{"unknown placeholder {{mesage}}"}},
		{"two tag CLIs", chart(`3,Process,,,,,"CLAUDE, gemini",,a,`),
			[]string{"tags name two CLIs, CLAUDE and GEMINI"}},
		{"several problems at once", chart("3,Process,,,,,,,,", "4,Line,,,3,99,,,,"),
			[]string{"has 2 problems", "the prompt (the shape's text) is empty", "destination 99"}},
		{"json without pages", []byte(`{"title": "x"}`), []string{`no "pages" in the JSON`}},
		{"json line to unknown shape", []byte(`{"pages":[{"items":{"shapes":[{"id":"a","class":"ProcessBlock","textAreas":[{"label":"Text","text":"x"}]}],
			"lines":[{"id":"L1","endpoint1":{"connectedTo":"a"},"endpoint2":{"connectedTo":"zz"}}]}}]}`),
			[]string{"line L1: the line's destination zz is not a shape of this chart"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := compileCSV(t, c.data)
			if err == nil {
				t.Fatal("no error")
			}
			var te *Error
			if !errors.As(err, &te) {
				t.Fatalf("error %T is not a *tree.Error: %v", err, err)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error\n%v\nlacks %q", err, w)
				}
			}
		})
	}
}

// withColumn adds a metadata column to a chart (value on the node rows).
func (b chartBytes) withColumn(name, value string) []byte {
	return b.withColumns(map[string]string{name: value})
}

type chartBytes []byte

func (b chartBytes) withColumns(cols map[string]string) []byte {
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	var names []string
	for k := range cols {
		names = append(names, k)
	}
	for i, l := range lines {
		switch {
		case i == 0:
			lines[i] = l + "," + strings.Join(names, ",")
		case strings.Contains(l, ",Process,"):
			for _, n := range names {
				l += "," + cols[n]
			}
			lines[i] = l
		default:
			lines[i] = l + strings.Repeat(",", len(names))
		}
	}
	return []byte(strings.Join(lines, "\n") + "\n")
}

// TestRootIsDeterministic: a Start terminator wins over other nodes without
// incoming lines (which are reported as never running), and without one
// the single orphan is the root.
func TestRootIsDeterministic(t *testing.T) {
	tr := mustCompile(t, chart("3,Process,,,,,,,stray note,", "4,Terminator,,,,,,,Start,", "5,Process,,,,,,,go,", "6,Line,,,4,5,,,,"))
	if tr.Root.ID != "4" {
		t.Errorf("root %s, want the Start terminator 4", tr.Root.ID)
	}
	if len(tr.Warnings) != 1 || !strings.Contains(tr.Warnings[0].String(), `node 3 (row 4) "stray note": no path from the start reaches this node`) {
		t.Errorf("warnings %v", tr.Warnings)
	}
	for i := 0; i < 20; i++ { // map order must not matter
		tr := mustCompile(t, chart("3,Process,,,,,,,a,", "4,Process,,,,,,,b,", "5,Line,,,3,4,,,,"))
		if tr.Root.ID != "3" {
			t.Fatalf("root %s, want 3", tr.Root.ID)
		}
	}
}

// TestTwoParentsKeepBothEdges: a node joined from two branches keeps both
// incoming lines, and both branches lead to it.
func TestTwoParentsKeepBothEdges(t *testing.T) {
	tr := mustCompile(t, chart("3,Decision,,,,,,,ok?,", "4,Process,,,,,,,fix,", "5,Process,,,,,,,ship,",
		"6,Line,,,3,4,,,No,", "7,Line,,,3,5,,,Yes,", "8,Line,,,4,5,,,,"))
	ship := step(t, tr, "5")
	if len(ship.In) != 2 {
		t.Fatalf("node 5 has %d incoming lines, want 2", len(ship.In))
	}
	if r, _ := step(t, tr, "3").Match("Yes"); r.To != ship {
		t.Error("Yes does not lead to node 5")
	}
	if r := step(t, tr, "4").Routes; len(r) != 1 || r[0].To != ship {
		t.Error("node 4 does not lead to node 5")
	}
}

// TestTagsAndMetadata: tags split on commas, NoValidation in any spelling,
// codename tags, every extra column as metadata, camelCase keys.
func TestTagsAndMetadata(t *testing.T) {
	for _, spelling := range []string{"NoValidation", "novalidation", "no_validation", "noValidation", "NO-VALIDATION"} {
		tr := mustCompile(t, chart(`3,Process,,,,,"urgent, `+spelling+`, gemini",,do it,`))
		s := step(t, tr, "3")
		if s.ValidatePrompt != "" || s.CLI != "GEMINI" || len(s.Tags) != 3 || s.Tags[0] != "urgent" {
			t.Errorf("%s: validate %q, CLI %s, tags %q", spelling, s.ValidatePrompt, s.CLI, s.Tags)
		}
	}
	data := (chart("3,Process,,,,,,,do it,", "4,Decision,,,,,,,ok?,", "5,Terminator,,,,,,,End,", "6,Terminator,,,,,,,End,",
		"7,Line,,,3,4,,,,", "8,Line,,,4,5,,,Yes,", "9,Line,,,4,6,,,No,")).
		withColumns(map[string]string{"validatePrompt": "Did it really?", "Retry-CLI": "cursor", "retries": "5", "timeout": "90s", "owner": "ann"})
	tr := mustCompile(t, data)
	s := step(t, tr, "3")
	if s.ValidatePrompt != "Did it really?" || s.RetryCLI != "CURSOR" || s.Retries != 5 || s.Timeout != 90*time.Second || s.Metadata["owner"] != "ann" {
		t.Errorf("step 3: %+v metadata %v", s, s.Metadata)
	}
	// A decision is validated only when given a validate_prompt.
	plain := mustCompile(t, chart("3,Decision,,,,,,,ok?,", "4,Terminator,,,,,,,End,", "5,Terminator,,,,,,,End,", "6,Line,,,3,4,,,Yes,", "7,Line,,,3,5,,,No,"))
	if d := step(t, plain, "3"); d.Kind != KindDecision || d.ValidatePrompt != "" {
		t.Errorf("plain decision: kind %s, validate %q", d.Kind, d.ValidatePrompt)
	}
	withVP := mustCompile(t, (chart("3,Decision,,,,,,,ok?,", "4,Terminator,,,,,,,End,", "5,Terminator,,,,,,,End,", "6,Line,,,3,4,,,Yes,", "7,Line,,,3,5,,,No,")).
		withColumnOn("Decision", "validate_prompt", "Is the choice justified?"))
	if d := step(t, withVP, "3"); d.ValidatePrompt != "Is the choice justified?" {
		t.Errorf("decision with validate_prompt: validate %q", d.ValidatePrompt)
	}
}

// withColumnOn adds a column whose value is set on rows of one shape.
func (b chartBytes) withColumnOn(shape, name, value string) []byte {
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	for i, l := range lines {
		switch {
		case i == 0:
			lines[i] = l + "," + name
		case strings.Contains(l, ","+shape+","):
			lines[i] = l + "," + value
		default:
			lines[i] = l + ","
		}
	}
	return []byte(strings.Join(lines, "\n") + "\n")
}

// TestSettingsApply: config's tree: section gives the defaults.
func TestSettingsApply(t *testing.T) {
	c, _, err := config.Parse("config.yml", []byte("tree:\n  default_cli: mine\n  validate_cli: gemini\n  retry_count: 0\n  timeout_s: 7\n  clis:\n    mine: my-ai <prompt>\n"))
	if err != nil {
		t.Fatal(err)
	}
	doc, err := Parse("t.csv", chart("3,Process,,,,,,,do it,"))
	if err != nil {
		t.Fatal(err)
	}
	tr, err := Compile(doc, c.Tree)
	if err != nil {
		t.Fatal(err)
	}
	s := tr.Root
	if s.CLI != "MINE" || s.ValidateCLI != "GEMINI" || s.RetryCLI != "MINE" || s.Retries != 0 || s.Timeout != 7*time.Second {
		t.Errorf("step: CLI %s validate %s retry %s retries %d timeout %s", s.CLI, s.ValidateCLI, s.RetryCLI, s.Retries, s.Timeout)
	}
}

func TestMatch(t *testing.T) {
	tr := mustCompile(t, chart("3,Decision,,,,,,,ok?,", "4,Terminator,,,,,,,End,", "5,Terminator,,,,,,,End,", "6,Line,,,3,4,,,Yes,", "7,Line,,,3,5,,,No,"))
	d := step(t, tr, "3")
	for answer, want := range map[string]string{"Yes": "4", " no ": "5", "YES": "4", "Maybe": ""} {
		got := ""
		if r, ok := d.Match(answer); ok {
			got = r.To.ID
		}
		if got != want {
			t.Errorf("Match(%q) = %q, want %q", answer, got, want)
		}
	}
}

// TestLintAndDescribe: Lint accepts codenames the project may configure,
// Describe summarises.
func TestLintAndDescribe(t *testing.T) {
	dir := t.TempDir()
	p := dir + "/x.tree.csv"
	if err := os.WriteFile(p, chart("3,Process,,,,,,,Write a poem about {{message}},").withColumn("cli", "MINE"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Lint(p); err != nil {
		t.Errorf("Lint: %v", err)
	}
	if _, err := Load(p, config.Default().Tree); err == nil || !strings.Contains(err.Error(), `unknown CLI codename "MINE"`) {
		t.Errorf("Load: %v", err)
	}
	d, err := Describe(p)
	if want := `Decision tree "Test chart" (1 node, 0 decisions), starting with: Write a poem about {{message}}`; err != nil || d != want {
		t.Errorf("Describe = %q, %v; want %q", d, err, want)
	}
}
