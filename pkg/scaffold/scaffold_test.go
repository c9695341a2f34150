package scaffold

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/decreehq/decree/internal/testtool"
	"github.com/decreehq/decree/pkg/config"
	"github.com/decreehq/decree/pkg/layout"
)

func lookOnly(names ...string) func(string) (string, error) {
	return func(n string) (string, error) {
		for _, x := range names {
			if x == n {
				return "/usr/bin/" + n, nil
			}
		}
		return "", errors.New("not found")
	}
}

func TestInitDetectsTool(t *testing.T) {
	tests := []struct {
		name     string
		onPath   []string
		force    string
		wantTool string
		wantCall string
	}{
		{"claude preferred", []string{"copilot", "claude"}, "", "claude", `claude -p "$1"`},
		{"opencode", []string{"opencode"}, "", "opencode", `opencode run "$1"`},
		{"copilot", []string{"copilot"}, "", "copilot", `copilot -p "$1"`},
		{"forced", []string{"claude"}, "opencode", "opencode", `opencode run`},
		{"none", nil, "", "", "no AI tool configured"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			rep, err := Init(dir, Options{Tool: tc.force, LookPath: lookOnly(tc.onPath...)})
			if err != nil {
				t.Fatal(err)
			}
			if rep.Tool != tc.wantTool {
				t.Fatalf("tool = %q, want %q", rep.Tool, tc.wantTool)
			}
			for _, r := range []string{"develop.sh", "rust-develop.sh"} {
				body, err := os.ReadFile(filepath.Join(dir, ".decree/routines", r))
				if err != nil {
					t.Fatal(err)
				}
				if !strings.Contains(string(body), tc.wantCall) {
					t.Errorf("%s does not call %q:\n%s", r, tc.wantCall, body)
				}
				if out, err := exec.Command("bash", "-n", filepath.Join(dir, ".decree/routines", r)).CombinedOutput(); err != nil {
					t.Errorf("%s is not valid bash: %v\n%s", r, err, out)
				}
			}
			cfg, warns, err := config.Load(filepath.Join(dir, ".decree/config.yml"))
			if err != nil || len(warns) > 0 {
				t.Fatalf("generated config.yml does not load cleanly: %v %v", err, warns)
			}
			if (tc.wantTool == "") != (cfg.Commands.Router == "") {
				t.Errorf("router = %q for tool %q", cfg.Commands.Router, tc.wantTool)
			}
			if _, ok := cfg.Routines["develop"]; !ok {
				t.Errorf("registry lacks develop: %v", cfg.Routines)
			}
		})
	}
}

func TestInitUnknownTool(t *testing.T) {
	_, err := Init(t.TempDir(), Options{Tool: "gpt9"})
	if err == nil || !strings.Contains(err.Error(), "claude, opencode, copilot") {
		t.Fatalf("want an error listing the known tools, got %v", err)
	}
}

func TestInitLayoutAndIdempotence(t *testing.T) {
	dir := t.TempDir()
	rep, err := Init(dir, Options{LookPath: lookOnly()})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range Dirs {
		if fi, err := os.Stat(filepath.Join(dir, ".decree", d)); err != nil || !fi.IsDir() {
			t.Errorf("missing directory .decree/%s", d)
		}
	}
	for _, f := range []string{".decree/config.yml", ".decree/router.md", ".decree/.gitignore", ".decree/routines/develop.sh"} {
		if !contains(rep.Created, f) {
			t.Errorf("Created does not list %s: %v", f, rep.Created)
		}
	}
	fi, _ := os.Stat(filepath.Join(dir, ".decree/routines/develop.sh"))
	if fi.Mode().Perm()&0o100 == 0 {
		t.Errorf("develop.sh mode %v is not executable", fi.Mode())
	}
	// A user edit survives a second init, which reports the file as kept.
	custom := filepath.Join(dir, ".decree/routines/develop.sh")
	if err := os.WriteFile(custom, []byte("#!/bin/bash\necho mine\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	rep2, err := Init(dir, Options{LookPath: lookOnly("claude")})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep2.Created) != 0 || !contains(rep2.Kept, ".decree/routines/develop.sh") {
		t.Fatalf("second init created %v, kept %v", rep2.Created, rep2.Kept)
	}
	if b, _ := os.ReadFile(custom); string(b) != "#!/bin/bash\necho mine\n" {
		t.Fatalf("init overwrote a user file: %q", b)
	}
}

// TestDevelopRoutineCallsAI runs the generated develop routine with real
// bash and a stand-in for the AI tool (a script that records its prompts).
func TestDevelopRoutineCallsAI(t *testing.T) {
	dir := t.TempDir()
	if _, err := Init(dir, Options{Tool: "claude"}); err != nil {
		t.Fatal(err)
	}
	bin := t.TempDir()
	record := filepath.Join(t.TempDir(), "prompts")
	fakeAI := "#!/usr/bin/env bash\n# stand-in for the claude CLI: records each prompt\nprintf '%s\\n' \"$2\" >> " + record + "\n"
	if err := os.WriteFile(filepath.Join(bin, "claude"), []byte(fakeAI), 0o755); err != nil {
		t.Fatal(err)
	}
	msgDir := filepath.Join(dir, ".decree/runs/2025010100000000-0")
	os.MkdirAll(msgDir, 0o755)
	os.WriteFile(filepath.Join(msgDir, "failure-context.md"), []byte("attempt 1 failed"), 0o644)
	cmd := exec.Command("bash", ".decree/routines/develop.sh")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"),
		"message_id=2025010100000000-0", "message_file="+msgDir+"/message.md",
		"message_dir="+msgDir, "spec_file=.decree/migrations/01-a.spec.md")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("develop.sh failed: %v\n%s", err, out)
	}
	got, _ := os.ReadFile(record)
	lines := strings.Split(strings.TrimSpace(string(got)), "\n")
	if len(lines) != 2 {
		t.Fatalf("AI called %d times, want 2 (implement, verify): %q", len(lines), got)
	}
	for _, want := range []string{"2025010100000000-0", "01-a.spec.md", "failure-context.md"} {
		if !strings.Contains(lines[0], want) {
			t.Errorf("first prompt lacks %q: %s", want, lines[0])
		}
	}
}

func TestNoToolRoutineFailsClearly(t *testing.T) {
	dir := t.TempDir()
	if _, err := Init(dir, Options{LookPath: lookOnly()}); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("bash", ".decree/routines/develop.sh")
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "no AI tool configured") {
		t.Fatalf("want a clear failure, got err=%v out=%s", err, out)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// TestGitIgnoreCoversRuntimeFiles asks git itself (check-ignore) which
// names of .decree/ the scaffolded .gitignore ignores: every file the
// controller, worker and decreectl keep as runtime state is ignored, the
// project's history (runs, inbox, processed.md) and configuration are not.
func TestGitIgnoreCoversRuntimeFiles(t *testing.T) {
	git := testtool.Require(t, "git")
	root := t.TempDir()
	if out, err := exec.Command(git, "-C", root, "init", "-q").CombinedOutput(); err != nil {
		t.Fatalf("git init: %v\n%s", err, out)
	}
	if _, err := Init(root, Options{Tool: "claude"}); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		ignored bool
	}{
		{layout.Socket, true},
		{layout.ControllerLock, true},
		{layout.Leases, true},
		{"." + layout.Leases + ".tmp-spare", true},
		{layout.Events, true},
		{layout.InstanceID, true},
		{layout.WorkerID, true},
		{"worker-0123456789ab.lock", true},
		{layout.LastRun, true},
		{"cron-state.json", true},
		{layout.StatCache, true},
		{layout.Objects + "/ab/cdef", true},
		{layout.Requests + "/key.json", true},
		{layout.OpenRuns + "/2025010100000000-0", true},
		{layout.Venv + "/bin/python", true},
		{layout.Runs + "/1-0/.state.json.tmp-spare", true},
		{layout.Config, false},
		{layout.Processed, false},
		{layout.Runs + "/1-0/run.json", false},
		{layout.Runs + "/1-0/routine.log", false},
		{layout.Done + "/fix.md", false},
		{layout.Dead + "/fix.md.dead.txt", false},
		{layout.Migrations + "/01-a.spec.md", false},
		{layout.Routines + "/develop.sh", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(layout.Dir, tc.name)
			err := exec.Command(git, "-C", root, "check-ignore", "-q", "--no-index", p).Run()
			var ee *exec.ExitError
			if err != nil && !errors.As(err, &ee) {
				t.Fatal(err)
			}
			if got := err == nil; got != tc.ignored {
				t.Errorf("git check-ignore %s: ignored=%v, want %v", p, got, tc.ignored)
			}
		})
	}
}

// TestInitCompletesOldGitIgnore: init on a project whose .gitignore came
// from an older decree appends the missing runtime names and keeps the
// user's own lines; a second init changes nothing.
func TestInitCompletesOldGitIgnore(t *testing.T) {
	root := t.TempDir()
	gi := filepath.Join(root, layout.Dir, layout.GitIgnore)
	if err := os.MkdirAll(filepath.Dir(gi), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(gi, []byte("decree.sock\nmine.txt"), 0o644); err != nil {
		t.Fatal(err)
	}
	rep, err := Init(root, Options{Tool: "claude"})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(rep.Updated, ".decree/.gitignore") {
		t.Errorf("Updated = %v, want .decree/.gitignore", rep.Updated)
	}
	b, _ := os.ReadFile(gi)
	lines := strings.Split(string(b), "\n")
	for _, want := range []string{"mine.txt", "controller.lock", "leases.json", "events.jsonl", "worker-*.lock"} {
		if !slices.Contains(lines, want) {
			t.Errorf(".gitignore lacks line %q:\n%s", want, b)
		}
	}
	if strings.Count(string(b), "decree.sock") != 1 {
		t.Errorf("decree.sock repeated:\n%s", b)
	}
	rep, err = Init(root, Options{Tool: "claude"})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Updated) != 0 || !slices.Contains(rep.Kept, ".decree/.gitignore") {
		t.Errorf("second init: Updated %v Kept %v", rep.Updated, rep.Kept)
	}
	if b2, _ := os.ReadFile(gi); string(b2) != string(b) {
		t.Errorf("second init changed .gitignore:\n%s", b2)
	}
}
