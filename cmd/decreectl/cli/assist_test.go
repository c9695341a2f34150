package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/decreehq/decree/internal/testtool"
	"github.com/decreehq/decree/pkg/scaffold"
	"github.com/decreehq/decree/pkg/skills"
)

type ctlResult struct {
	code           int
	stdout, stderr string
}

// ctl runs decreectl in-process with args.
func ctl(t *testing.T, args ...string) ctlResult {
	t.Helper()
	var out, errb bytes.Buffer
	code := Main(context.Background(), args, nil, &out, &errb)
	return ctlResult{code, out.String(), errb.String()}
}

func (r ctlResult) must(t *testing.T, code int) ctlResult {
	t.Helper()
	if r.code != code {
		t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", r.code, code, r.stdout, r.stderr)
	}
	return r
}

// promptFixture is pkg/prompt's fixture project, with its golden files.
const promptFixture = "../../../pkg/prompt/testdata"

// prompt --print renders the fixture exactly as pkg/prompt's golden files.
func TestPromptPrintGolden(t *testing.T) {
	root := filepath.Join(promptFixture, "project")
	for _, name := range []string{"spec", "review", "deploy"} {
		r := ctl(t, "-C", root, "prompt", name, "--print").must(t, 0)
		want, err := os.ReadFile(filepath.Join(promptFixture, "golden", name+".txt"))
		if err != nil {
			t.Fatal(err)
		}
		if r.stdout != string(want) {
			t.Errorf("prompt %s --print:\n%s\nwant:\n%s", name, r.stdout, want)
		}
	}
	r := ctl(t, "-C", root, "prompt").must(t, 0)
	for _, re := range []string{`(?m)^deploy +shared +Deploy checklist$`, `(?m)^review +project +Review \(project copy\)$`, `(?m)^spec +project +Write a spec$`} {
		if !regexp.MustCompile(re).MatchString(r.stdout) {
			t.Errorf("prompt list lacks %s:\n%s", re, r.stdout)
		}
	}
	r = ctl(t, "-C", root, "prompt", "nope").must(t, 2)
	if !strings.Contains(r.stderr, `prompt not found: "nope"`) {
		t.Errorf("unknown prompt: %s", r.stderr)
	}
}

// newInitProject runs init with claude and returns the project.
func newInitProject(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if _, err := scaffold.Init(dir, scaffold.Options{Tool: "claude"}); err != nil {
		t.Fatal(err)
	}
	return dir
}

// standIn writes an executable script into dir.
func standIn(t *testing.T, dir, name, body string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), []byte("#!/usr/bin/env bash\n"+body+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
}

// Without --print or --copy, prompt starts the interactive AI command with
// the rendered prompt as its last argument, in the project root, and
// passes its exit status on. The stand-in records what it was given.
func TestPromptStartsInteractiveAI(t *testing.T) {
	testtool.Require(t, "bash")
	dir := newInitProject(t)
	bin := t.TempDir()
	record := filepath.Join(t.TempDir(), "args")
	// A stand-in for the claude CLI: writes its arguments and working directory.
	standIn(t, bin, "claude", `printf '%s\n' "$PWD" "$#" "$@" > `+record+`; exit "${STANDIN_EXIT:-0}"`)
	t.Setenv("PATH", bin+":"+os.Getenv("PATH"))
	os.WriteFile(filepath.Join(dir, ".decree/migrations/01-login.spec.md"), []byte("# Login\n"), 0o644)
	want := ctl(t, "-C", dir, "prompt", "spec", "--print").must(t, 0).stdout

	ctl(t, "-C", dir, "prompt", "spec").must(t, 0)
	got, _ := os.ReadFile(record)
	wantRec := dir + "\n1\n" + want + "\n" // printf ends each argument with a newline
	if string(got) != wantRec {
		t.Fatalf("the AI got:\n%q\nwant:\n%q", got, wantRec)
	}
	if !strings.Contains(want, "- 01-login.spec.md: Login") {
		t.Errorf("the rendered spec prompt lacks the migration:\n%s", want)
	}
	t.Setenv("STANDIN_EXIT", "4")
	ctl(t, "-C", dir, "prompt", "spec").must(t, 4)

	// Without a configured or installed tool: a clear error.
	cfg := filepath.Join(dir, ".decree/config.yml")
	b, _ := os.ReadFile(cfg)
	os.WriteFile(cfg, bytes.Replace(b, []byte(`ai_interactive: "claude"`), []byte(`ai_interactive: ""`), 1), 0o644)
	t.Setenv("PATH", t.TempDir())
	r := ctl(t, "-C", dir, "prompt", "review").must(t, 2)
	if !strings.Contains(r.stderr, "commands.ai_interactive") {
		t.Errorf("no-tool error: %s", r.stderr)
	}
}

func TestPromptCopy(t *testing.T) {
	testtool.Require(t, "bash")
	dir := newInitProject(t)
	bin := t.TempDir()
	clip := filepath.Join(t.TempDir(), "clipboard")
	// A stand-in for xclip: stores standard input as the clipboard.
	standIn(t, bin, "xclip", `[ "$1 $2" = "-selection clipboard" ] || exit 9; cat > `+clip)
	t.Setenv("PATH", bin+":"+os.Getenv("PATH"))
	t.Setenv("DISPLAY", ":0")
	t.Setenv("WAYLAND_DISPLAY", "")
	want := ctl(t, "-C", dir, "prompt", "routine", "--print").must(t, 0).stdout
	r := ctl(t, "-C", dir, "prompt", "routine", "--copy").must(t, 0)
	if got, _ := os.ReadFile(clip); string(got) != want || r.stdout != "" || !strings.Contains(r.stderr, "copied to the clipboard (xclip)") {
		t.Fatalf("clipboard %q, stdout %q, stderr %q; want the rendered prompt", got, r.stdout, r.stderr)
	}
	t.Setenv("PATH", t.TempDir())
	r = ctl(t, "-C", dir, "prompt", "routine", "--copy").must(t, 1)
	if !strings.Contains(r.stderr, "no clipboard tool") || !strings.Contains(r.stderr, "--print") {
		t.Errorf("no clipboard: %s", r.stderr)
	}
}

func TestSkillInstall(t *testing.T) {
	dir := newInitProject(t)
	home := t.TempDir()
	t.Setenv("HOME", home)
	install := func(code int, args ...string) ctlResult {
		t.Helper()
		return ctl(t, append([]string{"-C", dir, "skill", "install"}, args...)...).must(t, code)
	}
	// Not a terminal: every choice must be a flag.
	r := install(2, "--target", "claude")
	if !strings.Contains(r.stderr, "--scope project|user") || !strings.Contains(r.stderr, "--skill NAME (or --all)") {
		t.Errorf("missing flags: %s", r.stderr)
	}
	r = install(0, "--scope", "project", "--target", "claude", "--all")
	if !strings.Contains(r.stdout, "installed    decree           .claude/skills/decree/SKILL.md") || !strings.HasSuffix(r.stdout, "claude skill(s): 2 installed\n") {
		t.Errorf("first install:\n%s", r.stdout)
	}
	r = install(0, "--scope", "project", "--target", "claude", "--all")
	if !strings.HasSuffix(r.stdout, "claude skill(s): 2 up to date\n") {
		t.Errorf("second install:\n%s", r.stdout)
	}
	edited := filepath.Join(dir, ".claude/skills/decree-routine/SKILL.md")
	os.WriteFile(edited, []byte("edited\n"), 0o644)
	r = install(1, "--scope", "project", "--target", "claude", "--skill", "decree-routine")
	if !strings.Contains(r.stdout, "conflict") || !strings.Contains(r.stderr, "--force") {
		t.Errorf("conflict: %+v", r)
	}
	if b, _ := os.ReadFile(edited); string(b) != "edited\n" {
		t.Fatal("conflicting file overwritten")
	}
	r = install(0, "--scope", "project", "--target", "claude", "--skill", "decree-routine", "--force")
	if !strings.HasSuffix(r.stdout, "1 overwritten\n") {
		t.Errorf("--force:\n%s", r.stdout)
	}
	// Copilot, project scope.
	install(0, "--scope", "project", "--target", "copilot", "--skill", "decree")
	if _, err := os.Stat(filepath.Join(dir, ".github/skills/decree/SKILL.md")); err != nil {
		t.Error(err)
	}
	// User scope goes to $HOME, never the project.
	r = install(0, "--scope", "user", "--target", "claude", "--all")
	for _, s := range skills.Names() {
		if _, err := os.Stat(filepath.Join(home, ".claude/skills", s, "SKILL.md")); err != nil {
			t.Errorf("user scope: %v", err)
		}
	}
	if !strings.Contains(r.stdout, filepath.Join("~", ".claude/skills/decree/SKILL.md")) {
		t.Errorf("user scope output:\n%s", r.stdout)
	}
	r = install(2, "--scope", "user", "--target", "copilot", "--all")
	if !strings.Contains(r.stderr, "use --scope project") {
		t.Errorf("copilot user scope: %s", r.stderr)
	}
	install(2, "--scope", "project", "--target", "claude", "--skill", "decree", "--all")
	install(2, "--scope", "project", "--target", "claude", "--skill", "nope")
}

// Every decreectl command and flag the bundled skills mention exists.
func TestSkillsMentionRealCommands(t *testing.T) {
	root := newRoot(&globals{})
	re := regexp.MustCompile(`decreectl ((?:[a-z][a-z-]*)(?: [a-z][a-z-]*)?)((?: \[?--[a-z-]+\]?)*)`)
	checked, flags := 0, 0
	for _, s := range skills.All() {
		for _, m := range re.FindAllStringSubmatch(string(s.Content), -1) {
			checked++
			words := strings.Fields(m[1])
			cmd, rest, err := root.Find(words)
			if err != nil || cmd == root || len(rest) > 1 || (len(rest) == 1 && cmd.HasSubCommands()) {
				t.Errorf("skill %s mentions `decreectl %s`, which is no command", s.Name, m[1])
				continue
			}
			for _, f := range strings.Fields(strings.NewReplacer("[", "", "]", "").Replace(m[2])) {
				flags++
				if cmd.Flags().Lookup(strings.TrimPrefix(f, "--")) == nil {
					t.Errorf("skill %s mentions `decreectl %s %s`, which has no such flag", s.Name, m[1], f)
				}
			}
		}
	}
	if checked < 10 || flags < 3 {
		t.Errorf("checked only %d mentions and %d flags; the pattern no longer finds them", checked, flags)
	}
}

// At a terminal, skill install asks for what the flags leave open: here
// the assistant (Enter: claude), the scope (Down, Enter: user) and the
// skill (typed, Enter).
func TestSkillInstallAsksAtTerminal(t *testing.T) {
	dir := newInitProject(t)
	home := t.TempDir()
	t.Setenv("HOME", home)
	term := testtool.NewTerminal(t, 30, 100)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	done := make(chan int, 1)
	go func() {
		done <- Main(ctx, []string{"-C", dir, "skill", "install"}, term.Tty, term.Tty, term.Tty)
	}()
	term.WaitFor("Assistant", 30*time.Second)
	term.Type("\r")
	term.WaitFor("Scope", 30*time.Second)
	term.Type("\x1b[B\r")
	term.WaitFor("Skill", 30*time.Second)
	term.Type("routine\r")
	if code := <-done; code != 0 {
		t.Fatalf("exit %d; the terminal shows:\n%s", code, term.Screen())
	}
	term.Tty.Close()
	if _, err := os.Stat(filepath.Join(home, ".claude/skills/decree-routine/SKILL.md")); err != nil {
		t.Fatalf("decree-routine not installed for the user: %v\n%s", err, term.Screen())
	}
	if _, err := os.Stat(filepath.Join(home, ".claude/skills/decree/SKILL.md")); err == nil {
		t.Error("installed a skill that was not chosen")
	}
}

func TestAge(t *testing.T) {
	for d, want := range map[time.Duration]string{
		-time.Second:                  "0s",
		45 * time.Second:              "45s",
		12 * time.Minute:              "12m",
		3*time.Hour + 20*time.Minute:  "3h20m",
		5 * time.Hour:                 "5h",
		50 * time.Hour:                "2d2h",
		48*time.Hour + 30*time.Minute: "2d",
	} {
		if got := age(d); got != want {
			t.Errorf("age(%v) = %q, want %q", d, got, want)
		}
	}
}
