package e2e

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/decreehq/decree/internal/testtool"
)

// assistScenarios cover what the README promises AI-assistant users: the
// built-in git hooks, pre-checks and the dead-letter summary of status.
var assistScenarios = []scenario{
	{"hooks/builtin-git-stashes-per-attempt", builtinGitHooks},
	{"hooks/builtin-git-outside-git", builtinGitHooksNoGit},
	{"hooks/unknown-name-fails-at-load", unknownHookName},
	{"precheck/dry-run-and-check", preChecks},
	{"ops/status-dead-letters", statusDeadLetters},
}

func TestAssistScenarios(t *testing.T) {
	for _, m := range modes {
		t.Run(string(m), func(t *testing.T) {
			t.Parallel()
			for _, sc := range assistScenarios {
				t.Run(sc.name, func(t *testing.T) {
					t.Parallel()
					sc.run(t, m)
				})
			}
		})
	}
}

const gitHooksConfig = `max_retries: 2
default_routine: develop
hooks:
  beforeEach: git-baseline
  afterEach: git-stash-changes
`

// flakyRoutine fails its first attempt (after writing a file) and
// succeeds on the second, writing another.
const flakyRoutine = `n="${DECREE_ATTEMPT:-1}"
echo "attempt $n" > "attempt-$n.txt"
[ "$n" -ge 2 ]`

// builtinGitHooks: in a git repository, with no hook files of their own,
// every attempt is kept as the stash decree/<id>/attempt-N holding that
// attempt's changes, and the tree, index and HEAD are left to decree.
func builtinGitHooks(t *testing.T, m mode) {
	testtool.Require(t, "git")
	p := newProject(t, m, gitHooksConfig)
	p.routine("develop", "", flakyRoutine)
	p.write("README", "hello\n")
	for _, args := range [][]string{{"init", "-q"}, {"config", "user.email", "t@example.com"}, {"config", "user.name", "t"},
		{"add", "README"}, {"commit", "-qm", "start"}} {
		if out, err := p.git("", args...); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	mustCode(t, p.ctl("", "run", "-m", "flaky", "-p", "do it"), 0)
	id := p.onlyRun()
	list, err := p.git("", "stash", "list")
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"1", "2"} {
		if !strings.Contains(list, ": decree/"+id+"/attempt-"+n+"\n") {
			t.Fatalf("no stash for attempt %s:\n%s", n, list)
		}
	}
	// The newest stash is attempt 2: it adds attempt-2.txt to the tree
	// attempt 1 left.
	show, _ := p.git("", "stash", "show", "--name-status", "stash@{0}")
	if !strings.Contains(show, "attempt-2.txt") || strings.Contains(show, "attempt-1.txt") {
		t.Errorf("attempt 2 stash:\n%s", show)
	}
	head, _ := p.git("", "log", "--oneline")
	if strings.Count(strings.TrimSpace(head), "\n") != 0 {
		t.Errorf("HEAD moved:\n%s", head)
	}
	if !p.exists("attempt-2.txt") {
		t.Error("the successful attempt's file is gone")
	}
	if p.exists(".decree/routines/git-baseline.sh") {
		t.Error("the built-in hook was written into .decree/routines/")
	}
}

// builtinGitHooksNoGit: outside a git repository the hooks note it and
// the message runs as usual.
func builtinGitHooksNoGit(t *testing.T, m mode) {
	p := newProject(t, m, gitHooksConfig)
	p.routine("develop", "", flakyRoutine)
	mustCode(t, p.ctl("", "run", "-m", "flaky", "-p", "do it"), 0)
	id := p.onlyRun()
	var logs strings.Builder
	ents, _ := os.ReadDir(p.path(".decree/runs/" + id))
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), "hook-") {
			logs.WriteString(p.read(filepath.ToSlash(filepath.Join(".decree/runs", id, e.Name()))))
		}
	}
	contains(t, "hook logs", logs.String(), "not in a git repository; nothing recorded")
}

// unknownHookName: a hook naming no routine stops decree when it loads
// the configuration, before any message, naming the key.
func unknownHookName(t *testing.T, m mode) {
	p := newProject(t, m, "hooks:\n  afterEach: git-stash\n")
	r := p.ctl("", "status")
	if r.code == 0 {
		t.Fatalf("status accepted an unknown hook\n%s", r)
	}
	contains(t, "stderr", r.stderr, `hooks.afterEach: routine "git-stash" not found`)
	contains(t, "stderr", r.stderr, "git-baseline, git-stash-changes")
}

// preChecks: process --dry-run lists each pending migration with its
// routine and pre-check result and exits 3 when one fails; routines
// --check runs every enabled routine's pre-check. Pre-checks run the
// routine with DECREE_PRE_CHECK=true and never its work.
func preChecks(t *testing.T, m mode) {
	p := newProject(t, m, "default_routine: develop\n")
	p.routine("develop", "", `if [ "${DECREE_PRE_CHECK:-}" = true ]; then
  [ -f tool-installed ] || { echo "the tool is not installed"; exit 1; }
  exit 0
fi
touch worked`)
	p.routine("plain", "", `touch plain-worked`)
	p.write(".decree/migrations/01-first.spec.md", "# First\n")
	p.write(".decree/migrations/02-second.spec.md", "---\nroutine: plain\n---\n# Second\n")
	r := p.ctl("", "process", "--dry-run")
	mustCode(t, r, 3)
	lines := []string{
		`01-first.spec.md +develop +FAIL: the tool is not installed`,
		`02-second.spec.md +plain +PASS \(no pre-check\)`,
	}
	for _, l := range lines {
		if !regexp.MustCompile(`(?m)^` + l + `$`).MatchString(r.stdout) {
			t.Errorf("dry run lacks %q\n%s", l, r)
		}
	}
	r = p.ctl("", "routines", "--check")
	mustCode(t, r, 3)
	if !regexp.MustCompile(`(?m)^develop +FAIL: the tool is not installed$`).MatchString(r.stdout) {
		t.Errorf("routines --check:\n%s", r)
	}
	p.write("tool-installed", "")
	r = p.ctl("", "process", "--dry-run")
	mustCode(t, r, 0)
	if !regexp.MustCompile(`(?m)^01-first.spec.md +develop +PASS$`).MatchString(r.stdout) {
		t.Errorf("dry run after the fix:\n%s", r)
	}
	mustCode(t, p.ctl("", "routines", "--check"), 0)
	if p.exists("worked") || p.exists("plain-worked") || len(p.runs()) != 0 {
		t.Errorf("a pre-check did the routine's work or started a run: runs %v", p.runs())
	}
}

// statusDeadLetters: status counts the dead letters and says how old the
// oldest is.
func statusDeadLetters(t *testing.T, m mode) {
	p := newProject(t, m, "max_retries: 1\ndefault_routine: develop\n")
	p.routine("develop", "", "exit 1")
	r := p.ctl("", "status")
	mustCode(t, r, 0)
	contains(t, "status", r.stdout, "dead        none\n")
	mustCode(t, p.ctl("", "run", "-m", "bad", "-p", "x"), 1)
	r = p.ctl("", "status")
	mustCode(t, r, 0)
	if !regexp.MustCompile(`(?m)^dead +1, oldest \d+s old`).MatchString(r.stdout) {
		t.Errorf("status:\n%s", r)
	}
	r = p.ctl("", "status", "-o", "json")
	contains(t, "status json", r.stdout, `"count": 1`)
	contains(t, "status json", r.stdout, `"oldestTime"`)
}
