package skills

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestBundledSkills(t *testing.T) {
	all := All()
	if got := strings.Join(Names(), ","); got != "decree,decree-routine" {
		t.Fatalf("bundled skills = %s", got)
	}
	for _, s := range all {
		if !strings.HasPrefix(string(s.Content), "---\nname: "+s.Name+"\n") {
			t.Errorf("%s: SKILL.md must start with frontmatter naming it", s.Name)
		}
		if len(s.Description) < 40 {
			t.Errorf("%s: description %q is too short to tell an assistant when to use it", s.Name, s.Description)
		}
	}
	d, _ := Get("decree")
	for _, must := range []string{"Given", "When", "Then", ".decree/runs/", "never"} {
		if !strings.Contains(string(d.Content), must) {
			t.Errorf("skill decree does not mention %q", must)
		}
	}
	r, _ := Get("decree-routine")
	for _, must := range []string{"message_file", "outbox", "exit", "failure-context.md", "DECREE_PRE_CHECK"} {
		if !strings.Contains(string(r.Content), must) {
			t.Errorf("skill decree-routine does not mention %q", must)
		}
	}
}

func TestDir(t *testing.T) {
	tests := []struct {
		scope, target, want, err string
	}{
		{ScopeProject, TargetClaude, "/p/.claude/skills", ""},
		{ScopeProject, TargetCopilot, "/p/.github/skills", ""},
		{ScopeUser, TargetClaude, "/h/.claude/skills", ""},
		{ScopeUser, TargetCopilot, "", "use --scope project"},
		{"global", TargetClaude, "", "choose project or user"},
		{ScopeProject, "cursor", "", "choose claude or copilot"},
	}
	for _, tt := range tests {
		got, err := Dir(tt.scope, tt.target, "/p", "/h")
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("Dir(%s, %s) = %q, %v; want error %q", tt.scope, tt.target, got, err, tt.err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("Dir(%s, %s) = %q, %v; want %q", tt.scope, tt.target, got, err, tt.want)
		}
	}
}

// Install twice, then a conflict, then --force.
func TestInstallIdempotentConflictForce(t *testing.T) {
	dir := filepath.Join(t.TempDir(), ".claude", "skills")
	names := Names()
	outcomes := func(rs []Result) string {
		var s []string
		for _, r := range rs {
			s = append(s, r.Skill+"="+string(r.Outcome))
		}
		return strings.Join(s, " ")
	}
	rs, err := Install(dir, names, false)
	if err != nil || outcomes(rs) != "decree=installed decree-routine=installed" {
		t.Fatalf("first install: %s %v", outcomes(rs), err)
	}
	for _, s := range All() {
		b, err := os.ReadFile(filepath.Join(dir, s.Name, "SKILL.md"))
		if err != nil || string(b) != string(s.Content) {
			t.Fatalf("%s not installed as bundled: %v", s.Name, err)
		}
	}
	rs, err = Install(dir, names, false)
	if err != nil || outcomes(rs) != "decree=up to date decree-routine=up to date" || Summary(rs) != "2 up to date" {
		t.Fatalf("second install: %s (%s) %v", outcomes(rs), Summary(rs), err)
	}
	edited := filepath.Join(dir, "decree", "SKILL.md")
	os.WriteFile(edited, []byte("my own notes\n"), 0o644)
	rs, err = Install(dir, names, false)
	if err != nil || outcomes(rs) != "decree=conflict decree-routine=up to date" || Summary(rs) != "1 up to date, 1 conflict" {
		t.Fatalf("conflict: %s (%s) %v", outcomes(rs), Summary(rs), err)
	}
	if b, _ := os.ReadFile(edited); string(b) != "my own notes\n" {
		t.Fatal("a conflicting file was overwritten without force")
	}
	rs, err = Install(dir, []string{"decree"}, true)
	if err != nil || outcomes(rs) != "decree=overwritten" {
		t.Fatalf("force: %s %v", outcomes(rs), err)
	}
	if b, _ := os.ReadFile(edited); !strings.HasPrefix(string(b), "---\nname: decree\n") {
		t.Fatal("--force did not restore the bundled file")
	}
	if _, err := Install(dir, []string{"nope"}, false); err == nil || !strings.Contains(err.Error(), "decree, decree-routine") {
		t.Errorf("unknown skill: %v", err)
	}
}
