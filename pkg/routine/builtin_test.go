package routine

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/decreehq/decree/internal/testtool"
	"github.com/decreehq/decree/pkg/config"
)

func builtinLib(t *testing.T) (Library, string) {
	t.Helper()
	root := t.TempDir()
	dir := filepath.Join(root, ".decree", "routines")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return Library{Dir: dir}, root
}

func TestBuiltinResolveAndOverride(t *testing.T) {
	lib, root := builtinLib(t)
	for _, name := range []string{"git-baseline", "git-stash-changes", "git-baseline.sh"} {
		rt, err := lib.Resolve(name)
		if err != nil {
			t.Fatalf("Resolve(%s): %v", name, err)
		}
		want := filepath.Join(root, ".decree", "cache", "builtin-routines", Stem(name)+".sh")
		if !rt.Builtin || rt.Path != want || rt.Format != FormatShell {
			t.Fatalf("Resolve(%s) = %+v, want the built-in at %s", name, rt, want)
		}
		got, err := os.ReadFile(rt.Path)
		src, _ := BuiltinSource(name)
		if err != nil || string(got) != src {
			t.Fatalf("built-in file %s: %v, content differs from the bundled script", rt.Path, err)
		}
	}
	// A stale copy is rewritten.
	rt, _ := lib.Resolve("git-baseline")
	os.WriteFile(rt.Path, []byte("echo stale\n"), 0o755)
	if rt, _ = lib.Resolve("git-baseline"); !strings.Contains(readFile(t, rt.Path), "refs/decree/") {
		t.Fatal("a stale built-in file was not rewritten")
	}
	// Another extension is not the built-in.
	if _, err := lib.Resolve("git-baseline.tree.csv"); !errors.Is(err, ErrRoutineNotFound) {
		t.Fatalf("git-baseline.tree.csv: %v, want not found", err)
	}
	// A project file of the same name wins.
	own := filepath.Join(lib.Dir, "git-baseline.sh")
	os.WriteFile(own, []byte("#!/usr/bin/env bash\necho mine\n"), 0o755)
	if rt, err := lib.Resolve("git-baseline"); err != nil || rt.Builtin || rt.Path != own {
		t.Fatalf("with a project file: %+v %v, want %s", rt, err, own)
	}
	// Built-ins are never listed (nor registered by routine-sync).
	ents, _ := lib.List()
	for _, e := range ents {
		if e.Builtin || e.Name == "git-stash-changes" {
			t.Fatalf("List includes built-in %s", e.Name)
		}
	}
}

func readFile(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestCheckHooks(t *testing.T) {
	lib, _ := builtinLib(t)
	os.WriteFile(filepath.Join(lib.Dir, "notify.sh"), []byte("#!/usr/bin/env bash\n"), 0o755)
	tests := []struct {
		hooks config.Hooks
		want  string // "" = valid
	}{
		{config.Hooks{}, ""},
		{config.Hooks{BeforeEach: "git-baseline", AfterEach: "git-stash-changes", OnDeadLetter: "notify"}, ""},
		{config.Hooks{AfterEach: "git-stash"}, `hooks.afterEach: routine "git-stash" not found`},
		{config.Hooks{BeforeAll: "nope"}, "built-in hook (git-baseline, git-stash-changes)"},
	}
	for _, tt := range tests {
		err := lib.CheckHooks(tt.hooks)
		if tt.want == "" && err != nil || tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)) {
			t.Errorf("CheckHooks(%+v) = %v, want %q", tt.hooks, err, tt.want)
		}
	}
}

// runHook runs a built-in hook script with bash in dir as a worker would.
func runHook(t *testing.T, lib Library, dir, name string, env ...string) (string, error) {
	t.Helper()
	rt, err := lib.Resolve(name)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("bash", rt.Path)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func git(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return string(out)
}

// The git hooks keep each attempt as a named stash based on the tree
// before it, and leave the working tree, the index and HEAD alone.
func TestGitHooksInRepository(t *testing.T) {
	testtool.Require(t, "git")
	lib, root := builtinLib(t)
	git(t, root, "init", "-q")
	git(t, root, "config", "user.email", "t@example.com")
	git(t, root, "config", "user.name", "t")
	// Status changes (ctime) are not trusted, as on many file systems
	// shared with other systems: only mtime and size tell an edit.
	git(t, root, "config", "core.trustctime", "false")
	os.WriteFile(filepath.Join(root, "a.txt"), []byte("one\n"), 0o644)
	// Written well before the commit, so the index entry is not racily
	// clean from the start (git would then always read the file).
	hourAgo := time.Now().Add(-time.Hour)
	if err := os.Chtimes(filepath.Join(root, "a.txt"), hourAgo, hourAgo); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(root, ".gitignore"), []byte("*.log\n"), 0o644)
	git(t, root, "add", "a.txt", ".gitignore")
	git(t, root, "commit", "-qm", "start")
	head := git(t, root, "rev-parse", "HEAD")
	id := "2026112418000000-0"
	attempt := func(n, content string) {
		env := []string{"message_id=" + id, "DECREE_ATTEMPT=" + n}
		if out, err := runHook(t, lib, root, "git-baseline", append(env, "DECREE_HOOK=beforeEach")...); err != nil {
			t.Fatalf("git-baseline: %v\n%s", err, out)
		}
		// The "routine": edits a tracked file, adds an untracked one and an ignored one.
		// The edit keeps the size and lands in the same instant as the
		// index was written (on purpose, as happens by chance within
		// one second): only git's racy-clean check, which compares the
		// index file's own mtime, can tell it from an unchanged file.
		same := statMtime(t, filepath.Join(root, "a.txt"))
		os.WriteFile(filepath.Join(root, "a.txt"), []byte(content), 0o644)
		for _, p := range []string{"a.txt", ".git/index"} {
			if err := os.Chtimes(filepath.Join(root, p), same, same); err != nil {
				t.Fatal(err)
			}
		}
		os.WriteFile(filepath.Join(root, "new-"+n+".txt"), []byte("new\n"), 0o644)
		os.WriteFile(filepath.Join(root, "noise.log"), []byte("x\n"), 0o644)
		out, err := runHook(t, lib, root, "git-stash-changes", append(env, "DECREE_HOOK=afterEach", "DECREE_ROUTINE_EXIT_CODE=1")...)
		if err != nil || !strings.Contains(out, "decree/"+id+"/attempt-"+n) {
			t.Fatalf("git-stash-changes: %v\n%s", err, out)
		}
	}
	attempt("1", "two\n")
	attempt("2", "three\n")

	list := git(t, root, "stash", "list")
	for _, n := range []string{"1", "2"} {
		if !strings.Contains(list, ": decree/"+id+"/attempt-"+n+"\n") {
			t.Fatalf("stash list lacks attempt %s:\n%s", n, list)
		}
	}
	// stash@{0} is attempt 2: against its baseline (the tree after attempt
	// 1) it changes a.txt from two to three and adds new-2.txt only.
	diff := git(t, root, "stash", "show", "-p", "stash@{0}")
	for _, want := range []string{"-two", "+three", "new-2.txt"} {
		if !strings.Contains(diff, want) {
			t.Errorf("attempt 2 stash lacks %q:\n%s", want, diff)
		}
	}
	for _, unwanted := range []string{"new-1.txt", "noise.log", ".decree"} {
		if strings.Contains(diff, unwanted) {
			t.Errorf("attempt 2 stash contains %q:\n%s", unwanted, diff)
		}
	}
	if git(t, root, "rev-parse", "refs/decree/"+id+"/baseline-1") == "" {
		t.Error("no baseline ref for attempt 1")
	}
	// Nothing else moved.
	if got := git(t, root, "rev-parse", "HEAD"); got != head {
		t.Errorf("HEAD moved: %s -> %s", head, got)
	}
	if st := git(t, root, "status", "--porcelain"); !strings.Contains(st, " M a.txt") || !strings.Contains(st, "?? new-1.txt") {
		t.Errorf("working tree or index changed:\n%s", st)
	}
	if b := readFile(t, filepath.Join(root, "a.txt")); b != "three\n" {
		t.Errorf("a.txt = %q, want the attempt's content", b)
	}
}

func statMtime(t *testing.T, path string) time.Time {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.ModTime()
}

func TestGitHooksOutsideRepository(t *testing.T) {
	testtool.Require(t, "git")
	lib, root := builtinLib(t)
	for _, name := range []string{"git-baseline", "git-stash-changes"} {
		out, err := runHook(t, lib, root, name, "message_id=2026112418000000-0", "DECREE_ATTEMPT=1", "DECREE_HOOK=beforeEach", "GIT_CEILING_DIRECTORIES="+filepath.Dir(root))
		if err != nil || !strings.Contains(out, "not in a git repository") {
			t.Errorf("%s outside git: %v\n%s", name, err, out)
		}
	}
	// Used as a message routine it refuses with a hint.
	out, err := runHook(t, lib, root, "git-baseline", "DECREE_HOOK=")
	if err == nil || !strings.Contains(out, "under hooks:") {
		t.Errorf("as a routine: %v\n%s", err, out)
	}
	// Its pre-check passes.
	if out, err := runHook(t, lib, root, "git-baseline", "DECREE_PRE_CHECK=true"); err != nil {
		t.Errorf("pre-check: %v\n%s", err, out)
	}
}
