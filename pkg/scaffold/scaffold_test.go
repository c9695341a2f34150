package scaffold

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/decreehq/decree/pkg/config"
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
