package routine

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/decreehq/decree/pkg/config"
)

// mkProject makes a project with the given config.yml and project routines.
func mkProject(t *testing.T, cfg string, files ...string) string {
	t.Helper()
	root := t.TempDir()
	dir := filepath.Join(root, ".decree", "routines")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, ".decree", "config.yml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if err := os.WriteFile(filepath.Join(dir, f), []byte("#!/bin/bash\necho "+f+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func TestSyncProject(t *testing.T) {
	root := mkProject(t, "# my settings\nmax_retries: 2\nroutine_source: shared\nroutines:\n  develop:\n    enabled: true\n  gone: {}\n",
		"develop.sh", "lint.sh")
	if err := os.MkdirAll(filepath.Join(root, "shared"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "shared", "deploy.sh"), []byte("echo\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	rep, err := SyncProject(root)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(rep.Added, []string{"lint"}) || !reflect.DeepEqual(rep.AddedShared, []string{"deploy"}) ||
		!reflect.DeepEqual(rep.Deprecated, []string{"gone"}) || len(rep.Restored) != 0 {
		t.Errorf("report = %+v", rep)
	}
	path := filepath.Join(root, ".decree", "config.yml")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"# my settings\nmax_retries: 2\n", "lint:", "deploy:", "deprecated: true"} {
		if !strings.Contains(string(data), want) {
			t.Errorf("config.yml lacks %q:\n%s", want, data)
		}
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}

	// Up to date: nothing reported, the file is not rewritten.
	rep, err = SyncProject(root)
	if err != nil || rep.Changed() {
		t.Fatalf("second sync: %+v, %v", rep, err)
	}
	st2, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if !os.SameFile(st, st2) || !st.ModTime().Equal(st2.ModTime()) {
		t.Error("an up-to-date sync rewrote config.yml")
	}
}

func TestSyncProjectBadConfig(t *testing.T) {
	const bad = "max_retries: [\n"
	root := mkProject(t, bad, "develop.sh")
	if _, err := SyncProject(root); err == nil || !strings.Contains(err.Error(), "config.yml") {
		t.Fatalf("SyncProject over a broken config.yml: err = %v, want one naming config.yml", err)
	}
	data, _ := os.ReadFile(filepath.Join(root, ".decree", "config.yml"))
	if string(data) != bad {
		t.Errorf("a broken config.yml was rewritten:\n%s", data)
	}
}

func TestProjectLibrary(t *testing.T) {
	tests := []struct {
		source, want string
	}{
		{"", ""},
		{"shared", "/p/shared"},
		{"/abs/routines", "/abs/routines"},
	}
	for _, tt := range tests {
		lib := ProjectLibrary("/p", &config.Config{RoutineSource: tt.source, NotebookSupport: true})
		if lib.Dir != "/p/.decree/routines" || lib.SharedDir != tt.want || !lib.NotebookSupport {
			t.Errorf("routine_source %q: library %+v, want shared dir %q", tt.source, lib, tt.want)
		}
	}
}
