package routine

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/decreehq/decree/pkg/fsutil"
)

// mkRoutines creates files (name -> content) in a fresh directory.
func mkRoutines(t *testing.T, files ...string) string {
	t.Helper()
	dir := t.TempDir()
	for _, f := range files {
		if err := os.WriteFile(filepath.Join(dir, f), []byte("#!/bin/bash\n# "+f+"\necho "+f+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestResolvePrecedence(t *testing.T) {
	tests := []struct {
		name     string
		files    []string
		notebook bool
		ask      string
		want     string // file name picked, or "" for not found
	}{
		{"shell only", []string{"develop.sh"}, false, "develop", "develop.sh"},
		{"notebook only, support on", []string{"develop.ipynb"}, true, "develop", "develop.ipynb"},
		{"both, support on: notebook wins", []string{"develop.sh", "develop.ipynb"}, true, "develop", "develop.ipynb"},
		{"both, support off: shell wins", []string{"develop.sh", "develop.ipynb"}, false, "develop", "develop.sh"},
		{"notebook only, support off", []string{"develop.ipynb"}, false, "develop", ""},
		{"neither", []string{"other.sh"}, true, "develop", ""},
		{"explicit .sh skips precedence", []string{"develop.sh", "develop.ipynb"}, true, "develop.sh", "develop.sh"},
		{"explicit .ipynb", []string{"develop.sh", "develop.ipynb"}, true, "develop.ipynb", "develop.ipynb"},
		{"explicit missing", []string{"develop.ipynb"}, true, "develop.sh", ""},
		{"tree json", []string{"triage.tree.json"}, false, "triage", "triage.tree.json"},
		{"tree json before csv", []string{"triage.tree.csv", "triage.tree.json"}, false, "triage", "triage.tree.json"},
		{"tree csv", []string{"triage.tree.csv"}, false, "triage", "triage.tree.csv"},
		{"shell before tree", []string{"triage.tree.csv", "triage.sh"}, false, "triage", "triage.sh"},
		{"explicit tree", []string{"triage.tree.csv", "triage.sh"}, false, "triage.tree.csv", "triage.tree.csv"},
		{"dotted bare name", []string{"v1.2-deploy.sh"}, false, "v1.2-deploy", "v1.2-deploy.sh"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := mkRoutines(t, tt.files...)
			lib := Library{Dir: dir, NotebookSupport: tt.notebook}
			r, err := lib.Resolve(tt.ask)
			if tt.want == "" {
				if !errors.Is(err, ErrRoutineNotFound) {
					t.Fatalf("Resolve(%q) = %+v, %v; want ErrRoutineNotFound", tt.ask, r, err)
				}
				if !strings.Contains(err.Error(), tt.ask) || !strings.Contains(err.Error(), dir) {
					t.Errorf("error %q should name the routine and where it looked", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Resolve(%q): %v", tt.ask, err)
			}
			if got := filepath.Base(r.Path); got != tt.want {
				t.Errorf("Resolve(%q) picked %s, want %s", tt.ask, got, tt.want)
			}
			if !filepath.IsAbs(r.Path) {
				t.Errorf("path %q is not absolute", r.Path)
			}
			stem, _, format, _ := SplitExt(tt.want)
			if r.Name != stem || r.Format != format {
				t.Errorf("got name %q format %q, want %q %q", r.Name, r.Format, stem, format)
			}
		})
	}
}

func TestResolveNotebookDisabledHints(t *testing.T) {
	dir := mkRoutines(t, "develop.ipynb")
	lib := Library{Dir: dir}
	for _, ask := range []string{"develop", "develop.ipynb"} {
		_, err := lib.Resolve(ask)
		if !errors.Is(err, ErrRoutineNotFound) {
			t.Fatalf("Resolve(%q) err = %v, want ErrRoutineNotFound", ask, err)
		}
		if !strings.Contains(err.Error(), "notebook_support") {
			t.Errorf("Resolve(%q) error %q should tell the user to enable notebook_support", ask, err)
		}
		var nf *NotFoundError
		if !errors.As(err, &nf) || nf.Name != ask {
			t.Errorf("error is not a *NotFoundError for %q: %#v", ask, err)
		}
	}
}

func TestResolveRejectsPaths(t *testing.T) {
	outside := t.TempDir()
	os.WriteFile(filepath.Join(outside, "x.sh"), []byte("echo x\n"), 0o644)
	dir := filepath.Join(outside, "routines")
	os.Mkdir(dir, 0o755)
	lib := Library{Dir: dir}
	for _, name := range []string{"../x", "../x.sh", "a/b", "/etc/passwd", "", "a\\b", "x\x00y"} {
		_, err := lib.Resolve(name)
		if !errors.Is(err, fsutil.ErrUnsafePath) {
			t.Errorf("Resolve(%q) err = %v, want ErrUnsafePath", name, err)
		}
	}
}

func TestSharedFallback(t *testing.T) {
	proj := mkRoutines(t, "develop.sh")
	shared := mkRoutines(t, "develop.sh", "deploy.sh", "notify.ipynb")
	lib := Library{Dir: proj, SharedDir: shared}
	r, err := lib.Resolve("develop")
	if err != nil || r.Shared || filepath.Dir(r.Path) != proj {
		t.Fatalf("develop: got %+v, %v; want the project routine", r, err)
	}
	r, err = lib.Resolve("deploy")
	if err != nil || !r.Shared || filepath.Dir(r.Path) != shared {
		t.Fatalf("deploy: got %+v, %v; want the shared routine", r, err)
	}
	// Project wins even when the shared directory has a preferred format.
	lib.NotebookSupport = true
	os.WriteFile(filepath.Join(shared, "develop.ipynb"), []byte("{}"), 0o644)
	if r, _ := lib.Resolve("develop"); r.Shared {
		t.Errorf("shared develop.ipynb beat project develop.sh")
	}
	if _, err := lib.Resolve("missing"); err == nil || !strings.Contains(err.Error(), shared) {
		t.Errorf("not-found error %v should mention the shared directory", err)
	}
}

func TestList(t *testing.T) {
	proj := mkRoutines(t, "develop.sh", "develop.ipynb", "review.ipynb", "triage.tree.csv", "README.md", ".hidden.sh")
	os.Mkdir(filepath.Join(proj, "dir.sh"), 0o755)
	shared := mkRoutines(t, "develop.sh", "deploy.sh")
	type row struct {
		Name   string
		Format Format
		Also   []Format
		Shared bool
	}
	summarize := func(es []Entry) []row {
		var out []row
		for _, e := range es {
			out = append(out, row{e.Name, e.Format, e.Also, e.Shared})
		}
		return out
	}
	on, err := Library{Dir: proj, SharedDir: shared, NotebookSupport: true}.List()
	if err != nil {
		t.Fatal(err)
	}
	wantOn := []row{
		{"deploy", FormatShell, nil, true},
		{"develop", FormatNotebook, []Format{FormatShell}, false},
		{"review", FormatNotebook, nil, false},
		{"triage", FormatTree, nil, false},
	}
	if got := summarize(on); !reflect.DeepEqual(got, wantOn) {
		t.Errorf("notebook support on:\n got %+v\nwant %+v", got, wantOn)
	}
	off, err := Library{Dir: proj, SharedDir: shared}.List()
	if err != nil {
		t.Fatal(err)
	}
	wantOff := []row{
		{"deploy", FormatShell, nil, true},
		{"develop", FormatShell, nil, false},
		{"triage", FormatTree, nil, false},
	}
	if got := summarize(off); !reflect.DeepEqual(got, wantOff) {
		t.Errorf("notebook support off:\n got %+v\nwant %+v", got, wantOff)
	}
	if es, err := (Library{Dir: filepath.Join(proj, "nope")}).List(); err != nil || len(es) != 0 {
		t.Errorf("missing directory: %v, %v; want empty", es, err)
	}
}

func TestShellDescription(t *testing.T) {
	tests := []struct{ name, src, want string }{
		{"spec example", "#!/usr/bin/env bash\n# Routine Name\n#\n# Description of it.\n# Second line.\nset -euo pipefail\n# not part\n",
			"Routine Name\n\nDescription of it.\nSecond line."},
		{"no shebang", "# Title\n# more\necho hi\n", "Title\nmore"},
		{"no comment", "#!/bin/bash\necho hi\n# late\n", ""},
		{"no space after hash kept", "#!/bin/bash\n#tight\n# loose\n", "#tight\nloose"},
		{"indent kept", "# a\n#   indented\n", "a\n  indented"},
		{"crlf", "#!/bin/bash\r\n# Title\r\n#\r\n# Body\r\necho\r\n", "Title\n\nBody"},
		{"trailing blank comment dropped", "# a\n#\n", "a"},
		{"empty", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ShellDescription([]byte(tt.src)); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestShellParamsFixture(t *testing.T) {
	src, err := os.ReadFile("testdata/pr-review.sh")
	if err != nil {
		t.Fatal(err)
	}
	want := []Param{
		{"spec_file", "", true}, {"message_file", "", true}, {"message_id", "", true},
		{"message_dir", "", true}, {"chain", "", true}, {"seq", "", true},
		{"target_branch", "main", true},
		{"reviewer", "alice smith", true},
		{"max_files", "20", true},
		{"computed", "", false},
		{"other", "", false},
		{"escaped", `a "quoted" word`, true},
	}
	got := ShellParams(src)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("ShellParams:\n got %+v\nwant %+v", got, want)
	}
	custom := Custom(got)
	if len(custom) != 6 || custom[0].Name != "target_branch" {
		t.Errorf("Custom = %+v; want target_branch first and no standard names", custom)
	}
}

func TestShellParamsStopRule(t *testing.T) {
	tests := []struct {
		name, src string
		want      []string
	}{
		{"stops at command", "a=1\necho x\nb=2\n", []string{"a"}},
		{"set and comments pass", "#!/bin/bash\n# c\nset -e\n\nset\na=1\n  # indented comment\nb=2\n", []string{"a", "b"}},
		{"export stops", "a=1\nexport b=2\nc=3\n", []string{"a"}},
		{"uppercase not matched and stops", "a=1\nFOO=2\nb=3\n", []string{"a"}},
		{"indented assignment stops", "a=1\n  b=2\n", []string{"a"}},
		{"setup is not set", "a=1\nsetup=1\nsetx\nb=1\n", []string{"a", "setup"}},
		{"duplicates once", "a=1\na=2\n", []string{"a"}},
		{"comparison-like", "a==1\n", []string{"a"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			for _, p := range ShellParams([]byte(tt.src)) {
				got = append(got, p.Name)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}

func TestShellDefaults(t *testing.T) {
	tests := []struct {
		line string
		def  string
		ok   bool
	}{
		{`x="${x:-}"`, "", true},
		{`x="${x:-main}"  # comment`, "main", true},
		{`x=${x:-dev}`, "dev", true},
		{`x="${y:-dev}"`, "", false},
		{`x="${x:-$HOME}"`, "", false},
		{`x=plain`, "plain", true},
		{`x='single $quoted'`, "single $quoted", true},
		{`x=`, "", true},
		{`x="a b"`, "a b", true},
		{`x=$(pwd)`, "", false},
		{"x=`pwd`", "", false},
		{`x=1; echo`, "", false},
		{`x=a\ b`, "a b", true},
	}
	for _, tt := range tests {
		ps := ShellParams([]byte(tt.line + "\n"))
		if len(ps) != 1 {
			t.Errorf("%s: got %d params", tt.line, len(ps))
			continue
		}
		if ps[0].Default != tt.def || ps[0].HasDefault != tt.ok {
			t.Errorf("%s: got (%q, %v), want (%q, %v)", tt.line, ps[0].Default, ps[0].HasDefault, tt.def, tt.ok)
		}
	}
}

func TestNotebookFixture(t *testing.T) {
	src, err := os.ReadFile("testdata/pr-review.ipynb")
	if err != nil {
		t.Fatal(err)
	}
	d, err := NotebookDescription(src)
	if err != nil || d != "# PR Review\n\nReviews the branch in a notebook." {
		t.Errorf("description = %q, %v", d, err)
	}
	ps, err := NotebookParams(src)
	if err != nil {
		t.Fatal(err)
	}
	want := []Param{
		{"spec_file", "", true}, {"message_file", "", true}, {"message_id", "", true},
		{"message_dir", "", true}, {"chain", "", true}, {"seq", "", true},
		{"target_branch", "", true},
		{"retries", "3", true},
		{"label", "it's # not a comment", true},
		{"verbose", "True", true},
		{"cwd", "", false},
	}
	if !reflect.DeepEqual(ps, want) {
		t.Errorf("NotebookParams:\n got %+v\nwant %+v", ps, want)
	}
}

func TestNotebookBadInput(t *testing.T) {
	for _, src := range []string{`{"cells": [`, `not json`, `{"cells": [{"cell_type": "code", "metadata": {"tags": ["parameters"]}, "source": 5}]}`} {
		if _, err := NotebookParams([]byte(src)); err == nil {
			t.Errorf("NotebookParams(%q) succeeded, want an error", src)
		}
	}
	// No parameters cell: no parameters, not an error.
	ps, err := NotebookParams([]byte(`{"cells": [{"cell_type": "code", "metadata": {}, "source": "x = 1"}]}`))
	if err != nil || len(ps) != 0 {
		t.Errorf("no parameters cell: %v, %v", ps, err)
	}
}

func TestRoutineMethods(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"pr-review.sh", "pr-review.ipynb"} {
		b, _ := os.ReadFile("testdata/" + f)
		os.WriteFile(filepath.Join(dir, f), b, 0o644)
	}
	os.WriteFile(filepath.Join(dir, "bad.ipynb"), []byte("{oops"), 0o644)
	for _, nb := range []bool{false, true} {
		lib := Library{Dir: dir, NotebookSupport: nb}
		r, err := lib.Resolve("pr-review")
		if err != nil {
			t.Fatal(err)
		}
		desc, err := r.Description()
		if err != nil || !strings.Contains(desc, "PR Review") {
			t.Errorf("%s description = %q, %v", r.Format, desc, err)
		}
		custom, err := r.CustomParams()
		if err != nil || len(custom) == 0 || custom[0].Name != "target_branch" {
			t.Errorf("%s custom params = %+v, %v; want target_branch recognised", r.Format, custom, err)
		}
	}
	r, err := Library{Dir: dir, NotebookSupport: true}.Resolve("bad")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.CustomParams(); err == nil || !strings.Contains(err.Error(), "bad") || !strings.Contains(err.Error(), "JSON") {
		t.Errorf("malformed notebook error %v should name the routine and say it is not valid JSON", err)
	}
}

func TestSelectCustom(t *testing.T) {
	custom := []Param{{Name: "target_branch"}, {Name: "reviewer", Default: "bob", HasDefault: true}}
	fields := map[string]string{"target_branch": "main", "unknown_field": "value", "chain": "x"}
	got := SelectCustom(custom, fields)
	want := map[string]string{"target_branch": "main"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("SelectCustom = %v, want %v (unknown fields ignored, missing ones left to the default)", got, want)
	}
}

func TestOrderedParams(t *testing.T) {
	got := OrderedParams(map[string]string{"zeta": "", "seq": "", "spec_file": "", "alpha": "", "chain": ""})
	want := []string{"spec_file", "chain", "seq", "alpha", "zeta"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}
