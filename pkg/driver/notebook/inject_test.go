package notebook

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/decreehq/decree/pkg/driver/internal/drivertest"
)

// Python itself is the oracle: every rendered value must parse with
// ast.literal_eval to the expected Python value.
func TestPythonValueWithPython(t *testing.T) {
	py := drivertest.RequireTool(t, "python3")
	tests := []struct{ in, wantRepr string }{
		{"main", "'main'"},
		{"", "''"},
		{"0", "0"},
		{"007", "7"},
		{"-12", "-12"},
		{"1.5", "1.5"},
		{"1e3", "1000.0"},
		{"True", "True"},
		{"None", "None"},
		{"true", "'true'"},
		{`quote " and \ backslash`, `'quote " and \\ backslash'`},
		{"it's", `"it's"`},
		{"line1\nline2\ttab\r", `'line1\nline2\ttab\r'`},
		{"ctrl\x01\x7f", `'ctrl\x01\x7f'`},
		{"unicode é ✓ \u2028", `'unicode é ✓ \u2028'`},
		{"bad \xff byte", "'bad \ufffd byte'"},
		{"nan", "'nan'"},
		{"1_000", "'1_000'"},
		{"\"\"\"", `'"""'`},
	}
	var src strings.Builder
	src.WriteString("import ast, sys\n")
	for _, tt := range tests {
		src.WriteString("print(repr(ast.literal_eval(" + PythonString(PythonValue(tt.in)) + ")))\n")
	}
	out, err := exec.Command(py, "-c", src.String()).CombinedOutput()
	if err != nil {
		t.Fatalf("python: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	if len(lines) != len(tests) {
		t.Fatalf("python printed %d lines for %d cases:\n%s", len(lines), len(tests), out)
	}
	for i, tt := range tests {
		if lines[i] != tt.wantRepr {
			t.Errorf("PythonValue(%q) evaluates to %s, want %s", tt.in, lines[i], tt.wantRepr)
		}
	}
}

func TestInjectParameters(t *testing.T) {
	src, err := os.ReadFile("testdata/pr-review.ipynb")
	if err != nil {
		t.Fatal(err)
	}
	once, err := InjectParameters(src, map[string]string{"chain": "c1", "target_branch": "main", "seq": "0"})
	if err != nil {
		t.Fatal(err)
	}
	// Injecting again replaces the earlier cell instead of adding one.
	twice, err := InjectParameters(once, map[string]string{"chain": "c2"})
	if err != nil {
		t.Fatal(err)
	}
	var nb struct {
		Cells []struct {
			Metadata struct{ Tags []string } `json:"metadata"`
			Source   json.RawMessage         `json:"source"`
			ID       string                  `json:"id"`
		} `json:"cells"`
	}
	if err := json.Unmarshal(twice, &nb); err != nil {
		t.Fatal(err)
	}
	var injected []int
	for i, c := range nb.Cells {
		for _, tag := range c.Metadata.Tags {
			if tag == "injected-parameters" {
				injected = append(injected, i)
			}
		}
	}
	if len(injected) != 1 || injected[0] != 2 {
		t.Fatalf("injected cells at %v, want exactly one at index 2", injected)
	}
	var s string
	json.Unmarshal(nb.Cells[2].Source, &s)
	if s != "# Parameters\nchain = \"c2\"\n" {
		t.Errorf("injected source = %q", s)
	}
	if nb.Cells[2].ID == "" {
		t.Errorf("nbformat 4.5 cell without id")
	}
	first, _ := InjectParameters(src, map[string]string{"chain": "c1", "target_branch": "main", "seq": "0"})
	json.Unmarshal(first, &nb)
	json.Unmarshal(nb.Cells[2].Source, &s)
	if s != "# Parameters\nchain = \"c1\"\nseq = 0\ntarget_branch = \"main\"\n" {
		t.Errorf("standard parameters first, then custom, typed like papermill; got %q", s)
	}
	for _, bad := range []string{"{", `{"cells": 3}`, `{"cells": [1]}`} {
		if _, err := InjectParameters([]byte(bad), nil); err == nil {
			t.Errorf("InjectParameters(%q) succeeded", bad)
		}
	}
}

// Cells of an nbformat 4.5 notebook that lack an id get a unique one
// (Jupyter warns about, and will reject, cells without); existing ids stay,
// and older notebooks get none.
func TestInjectFillsCellIDs(t *testing.T) {
	tests := []struct {
		name  string
		minor int
		want  bool
	}{{"nbformat 4.5", 5, true}, {"nbformat 4.4", 4, false}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := fmt.Sprintf(`{"nbformat": 4, "nbformat_minor": %d, "metadata": {}, "cells": [
{"cell_type": "markdown", "metadata": {}, "source": "# Doc"},
{"cell_type": "code", "id": "keep", "metadata": {"tags": ["parameters"]}, "outputs": [], "execution_count": null, "source": "x = 1"},
{"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": null, "source": "print(x)"}]}`, tt.minor)
			out, err := InjectParameters([]byte(src), map[string]string{"x": "2"})
			if err != nil {
				t.Fatal(err)
			}
			var nb struct {
				Cells []map[string]any `json:"cells"`
			}
			if err := json.Unmarshal(out, &nb); err != nil {
				t.Fatal(err)
			}
			seen := map[string]bool{}
			for i, c := range nb.Cells {
				id, has := c["id"].(string)
				switch {
				case i == 1 && id != "keep":
					t.Errorf("cell 1 id = %q, want the existing \"keep\"", id)
				case !tt.want && has && i != 1:
					t.Errorf("cell %d of an nbformat 4.4 notebook got id %q", i, id)
				case tt.want && (!has || seen[id]):
					t.Errorf("cell %d id = %q, want a unique id", i, id)
				}
				seen[id] = true
			}
		})
	}
}
