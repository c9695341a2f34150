package scaffold

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/decreehq/decree/internal/testtool"
)

// The generated routines answer a pre-check without calling the AI tool:
// ready when it is on PATH, not ready (with the reason) when it is not.
func TestRoutinesPreCheck(t *testing.T) {
	bash := testtool.Require(t, "bash")
	dir := t.TempDir()
	if _, err := Init(dir, Options{Tool: "claude"}); err != nil {
		t.Fatal(err)
	}
	withAI := t.TempDir()
	record := filepath.Join(t.TempDir(), "called")
	stand := "#!/usr/bin/env bash\n# stand-in for the claude and cargo CLIs: records that it ran\necho ran >> " + record + "\n"
	for _, n := range []string{"claude", "cargo"} {
		os.WriteFile(filepath.Join(withAI, n), []byte(stand), 0o755)
	}
	empty := t.TempDir()
	tests := []struct {
		routine, path string
		wantOK        bool
		wantOut       string
	}{
		{"develop.sh", withAI, true, ""},
		{"develop.sh", empty, false, "claude is not on PATH"},
		{"rust-develop.sh", withAI, true, ""},
	}
	for _, tt := range tests {
		cmd := exec.Command(bash, filepath.Join(".decree/routines", tt.routine))
		cmd.Dir = dir
		cmd.Env = []string{"PATH=" + tt.path, "DECREE_PRE_CHECK=true"}
		out, err := cmd.CombinedOutput()
		if (err == nil) != tt.wantOK || !strings.Contains(string(out), tt.wantOut) {
			t.Errorf("%s pre-check with PATH=%s: err=%v out=%q, want ok=%v and %q", tt.routine, tt.path, err, out, tt.wantOK, tt.wantOut)
		}
	}
	if _, err := os.Stat(record); err == nil {
		t.Error("a pre-check called the AI tool or cargo")
	}
	// Without a tool the pre-check says how to fix it.
	none := t.TempDir()
	if _, err := Init(none, Options{LookPath: lookOnly()}); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bash, ".decree/routines/develop.sh")
	cmd.Dir = none
	cmd.Env = append(os.Environ(), "DECREE_PRE_CHECK=true")
	if out, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(out), "no AI tool configured") {
		t.Errorf("no-tool pre-check: err=%v out=%q", err, out)
	}
}

func TestInitWritesPromptsAndInteractiveCommand(t *testing.T) {
	dir := t.TempDir()
	rep, err := Init(dir, Options{Tool: "copilot"})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"spec", "routine", "review"} {
		f := ".decree/prompts/" + p + ".md"
		if !contains(rep.Created, f) {
			t.Errorf("init did not create %s: %v", f, rep.Created)
		}
	}
	cfg, err := os.ReadFile(filepath.Join(dir, ".decree/config.yml"))
	if err != nil || !strings.Contains(string(cfg), `ai_interactive: "copilot -i"`) {
		t.Errorf("config.yml lacks the interactive command: %v\n%s", err, cfg)
	}
	if tool, ok := DetectTool(lookOnly("opencode")); !ok || tool.Interactive != "opencode --prompt" {
		t.Errorf("DetectTool = %+v %v", tool, ok)
	}
	if _, ok := DetectTool(lookOnly()); ok {
		t.Error("DetectTool found a tool on an empty PATH")
	}
}
