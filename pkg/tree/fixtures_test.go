package tree

import (
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/decreehq/decree/internal/testtool"
	"github.com/decreehq/decree/pkg/config"
)

// route is "label->id" of one outgoing line.
type want struct {
	title  string
	nodes  int
	lines  int
	root   string
	kinds  map[string]Kind
	routes map[string][]string // node id -> "label->dest id"
	tags   map[string][]string
	meta   map[string]map[string]string
	cli    map[string]string // node id -> codename
	valid  map[string]bool   // node id -> validated
}

// TestSharedFixtures imports every real Lucid export of the shared
// fixtures (MonadsCLI's test data) and checks the chart it yields.
func TestSharedFixtures(t *testing.T) {
	dir := testtool.SharedFixtures(t, "monads")
	cases := map[string]want{
		"AnimalTest.csv": {
			title: "AnimalTest", nodes: 6, lines: 5, root: "3",
			kinds:  map[string]Kind{"3": KindStart, "4": KindProcess, "5": KindDecision, "6": KindProcess, "7": KindEnd, "8": KindEnd},
			routes: map[string][]string{"3": {"->4"}, "4": {"->5"}, "5": {"Yes->7", "No->6"}, "6": {"->8"}, "7": nil, "8": nil},
			tags:   map[string][]string{"4": nil, "5": nil},
			meta:   map[string]map[string]string{"4": {}, "5": {}},
			cli:    map[string]string{"4": "CLAUDE", "5": "CLAUDE", "6": "CLAUDE"},
			valid:  map[string]bool{"4": true, "5": false, "6": true},
		},
		"ExplainYourself.csv": {
			title: "Explain Yourself", nodes: 7, lines: 6, root: "3",
			kinds:  map[string]Kind{"3": KindStart, "6": KindProcess, "8": KindEnd},
			routes: map[string][]string{"3": {"->6"}, "6": {"->5"}, "5": {"->9"}, "9": {"->7"}, "7": {"->4"}, "4": {"->8"}},
			tags:   map[string][]string{"4": {"CLAUDE"}, "5": {"COPILOT"}, "6": {"GEMINI"}, "7": {"QODO"}, "9": {"CURSOR"}},
			cli:    map[string]string{"4": "CLAUDE", "5": "COPILOT", "6": "GEMINI", "7": "QODO", "9": "CURSOR"},
			valid:  map[string]bool{"4": true, "6": true},
		},
		"sample_data.csv": {
			title: "Blank diagram", nodes: 5, lines: 4, root: "3",
			kinds:  map[string]Kind{"3": KindProcess, "4": KindProcess, "5": KindDecision, "6": KindProcess, "7": KindProcess},
			routes: map[string][]string{"3": {"->4"}, "4": {"->5"}, "5": {"No->6", "Yes->7"}, "6": nil, "7": nil},
			tags:   map[string][]string{"3": {"NoValidation"}, "4": nil},
			meta:   map[string]map[string]string{"3": {"testprop": "Test"}, "4": {}},
			valid:  map[string]bool{"3": false, "4": true, "5": false, "6": true},
		},
		"sample_data.json": {
			title: "Blank diagram", nodes: 5, lines: 4, root: "CXSt0TzudBZw",
			kinds: map[string]Kind{"CXSt0TzudBZw": KindProcess, "vXXtFT8N6j~i": KindDecision, "pkUt-kq8-kH_": KindProcess},
			routes: map[string][]string{"CXSt0TzudBZw": {"->pkUt-kq8-kH_"}, "pkUt-kq8-kH_": {"->vXXtFT8N6j~i"},
				"vXXtFT8N6j~i": {"Yes->RXXtgxciaUc-", "No->NXXt8UuE_PDl"}, "NXXt8UuE_PDl": nil},
			meta: map[string]map[string]string{"CXSt0TzudBZw": {"TestProp": "Test"}, "vXXtFT8N6j~i": {}},
		},
		"sample_single_node.csv": {
			title: "Single node run", nodes: 1, lines: 0, root: "3",
			kinds: map[string]Kind{"3": KindProcess}, routes: map[string][]string{"3": nil},
			tags: map[string][]string{"3": {"NoValidation"}}, valid: map[string]bool{"3": false},
		},
		"sample_with_validation.csv": {
			title: "Run with validation", nodes: 1, lines: 0, root: "3",
			kinds: map[string]Kind{"3": KindProcess}, tags: map[string][]string{"3": nil}, valid: map[string]bool{"3": true},
		},
	}
	for file, w := range cases {
		t.Run(file, func(t *testing.T) {
			tr, err := Load(filepath.Join(dir, file), config.Default().Tree)
			if err != nil {
				t.Fatal(err)
			}
			if tr.Doc.Title != w.title || len(tr.Steps) != w.nodes || len(tr.Doc.Lines) != w.lines || tr.Root.ID != w.root {
				t.Errorf("title %q, %d nodes, %d lines, root %s; want %q, %d, %d, %s",
					tr.Doc.Title, len(tr.Steps), len(tr.Doc.Lines), tr.Root.ID, w.title, w.nodes, w.lines, w.root)
			}
			if len(tr.Warnings) != 0 {
				t.Errorf("warnings: %v", tr.Warnings)
			}
			byID := map[string]*Step{}
			for _, s := range tr.Steps {
				byID[s.ID] = s
			}
			step := func(id string) *Step {
				s := byID[id]
				if s == nil {
					t.Fatalf("no node %s", id)
				}
				return s
			}
			for id, k := range w.kinds {
				if got := step(id).Kind; got != k {
					t.Errorf("node %s kind %s, want %s", id, got, k)
				}
			}
			for id, rs := range w.routes {
				var got []string
				for _, r := range step(id).Routes {
					got = append(got, r.Label+"->"+r.To.ID)
				}
				if !reflect.DeepEqual(got, rs) {
					t.Errorf("node %s routes %v, want %v", id, got, rs)
				}
			}
			for id, tags := range w.tags {
				if got := step(id).Tags; !reflect.DeepEqual(got, tags) {
					t.Errorf("node %s tags %v, want %v", id, got, tags)
				}
			}
			for id, m := range w.meta {
				if got := step(id).Metadata; !reflect.DeepEqual(got, m) {
					t.Errorf("node %s metadata %v, want %v", id, got, m)
				}
			}
			for id, c := range w.cli {
				if got := step(id).CLI; got != c {
					t.Errorf("node %s CLI %s, want %s", id, got, c)
				}
			}
			for id, v := range w.valid {
				if got := step(id).ValidatePrompt != ""; got != v {
					t.Errorf("node %s validated %v, want %v", id, got, v)
				}
			}
		})
	}
}

// TestCSVAndJSONAgree: the two exports of sample_data are the same chart.
func TestCSVAndJSONAgree(t *testing.T) {
	dir := testtool.SharedFixtures(t, "monads")
	shape := func(file string) []string {
		tr, err := Load(filepath.Join(dir, file), config.Default().Tree)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		var walk func(s *Step, depth int)
		walk = func(s *Step, depth int) {
			out = append(out, strings.Repeat(" ", depth)+string(s.Kind)+" "+s.Text+" "+strings.Join(s.Labels(), "/"))
			for _, r := range s.Routes {
				walk(r.To, depth+1)
			}
		}
		walk(tr.Root, 0)
		return out
	}
	csv, js := shape("sample_data.csv"), shape("sample_data.json")
	// The JSON lists Yes before No; compare as sets of lines.
	if len(csv) != len(js) {
		t.Fatalf("csv %v\njson %v", csv, js)
	}
	seen := map[string]int{}
	for _, l := range csv {
		seen[strings.ReplaceAll(l, "No/Yes", "Yes/No")]++
	}
	for _, l := range js {
		seen[l]--
	}
	for l, n := range seen {
		if n != 0 {
			t.Errorf("%q differs between the CSV and JSON exports (%d)\ncsv %v\njson %v", l, n, csv, js)
		}
	}
}
