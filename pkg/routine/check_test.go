package routine

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/decreehq/decree/pkg/config"
)

func TestCheck(t *testing.T) {
	tests := []struct {
		name, file, content string
		format              Format
		want                string // "" means valid
	}{
		{"shell", "a.sh", "#!/bin/bash\necho hi\n", FormatShell, ""},
		{"shell without shebang or x bit", "a.sh", "echo hi\n", FormatShell, ""},
		{"crlf", "a.sh", "#!/bin/bash\necho hi\r\n", FormatShell, "CRLF) line endings (first at line 2)"},
		{"nul", "a.sh", "echo \x00\n", FormatShell, "NUL bytes"},
		{"notebook", "a.ipynb", `{"nbformat": 4, "nbformat_minor": 5, "cells": [], "metadata": {}}`, FormatNotebook, ""},
		{"torn notebook", "a.ipynb", `{"cells": [`, FormatNotebook, "not a valid notebook"},
		{"not a notebook", "a.ipynb", `{"hello": 1}`, FormatNotebook, `no "cells" list`},
		{"nbformat 3", "a.ipynb", `{"nbformat": 3, "cells": []}`, FormatNotebook, "too old"},
		{"tree", "a.tree.csv", "Id,Name,Line Source,Line Destination,Text Area 1\n1,Process,,,Do it\n", FormatTree, ""},
		{"tree with an unknown codename (the driver checks those)", "a.tree.csv", "Id,Name,Line Source,Line Destination,Text Area 1,cli\n1,Process,,,Do it,MINE\n", FormatTree, ""},
		{"not a tree", "a.tree.csv", "anything", FormatTree, "missing column(s) Id, Name"},
		{"tree with a cycle", "a.tree.json", `{"pages":[{"items":{"shapes":[{"id":"a","textAreas":[{"text":"x"}]},{"id":"b","textAreas":[{"text":"y"}]}],
			"lines":[{"id":"l1","endpoint1":{"connectedTo":"a"},"endpoint2":{"connectedTo":"b"}},{"id":"l2","endpoint1":{"connectedTo":"b"},"endpoint2":{"connectedTo":"a"}}]}}]}`, FormatTree, "the lines form a cycle"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), tt.file)
			if err := os.WriteFile(p, []byte(tt.content), 0o644); err != nil {
				t.Fatal(err)
			}
			err := Routine{Name: "a", Path: p, Format: tt.format}.Check()
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("Check = %v, want valid", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "routine a")):
				t.Errorf("Check = %v, want an error naming routine a and saying %q", err, tt.want)
			}
		})
	}
	if err := (Routine{Name: "gone", Path: filepath.Join(t.TempDir(), "gone.sh"), Format: FormatShell}).Check(); err == nil {
		t.Error("Check of a missing file succeeded")
	}
}

// TestCheckTreeWithSettings: with the project's tree: settings, an
// unknown CLI codename is a problem; a codename added there is not.
func TestCheckTreeWithSettings(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "a.tree.csv")
	if err := os.WriteFile(p, []byte("Id,Name,Line Source,Line Destination,Text Area 1,cli\n1,Process,,,Do it,MINE\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	set := config.Default().Tree
	err := Routine{Name: "a", Path: p, Format: FormatTree, Tree: &set}.Check()
	if err == nil || !strings.Contains(err.Error(), `unknown CLI codename "MINE"`) {
		t.Errorf("Check = %v", err)
	}
	set.CLIs["MINE"] = "mine <prompt>"
	lib := Library{Dir: dir, Tree: &set}
	r, err := lib.Resolve("a")
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Check(); err != nil {
		t.Errorf("Check with MINE configured = %v", err)
	}
}
