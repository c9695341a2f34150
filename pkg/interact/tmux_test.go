package interact

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/decreehq/decree/internal/testtool"
)

// demoEnv makes the test binary act as a tiny interactive program: it runs
// Ask on its own terminal and writes the outcome as JSON to the named file.
// The tmux test starts it that way, so a real terminal emulator draws it.
const demoEnv = "DECREE_INTERACT_DEMO_OUT"

func TestMain(m *testing.M) {
	if out := os.Getenv(demoEnv); out != "" {
		os.Exit(runDemo(out))
	}
	os.Exit(m.Run())
}

type demoOutcome struct {
	Answers *Answers `json:"answers,omitempty"`
	Err     string   `json:"err,omitempty"`
	Aborted bool     `json:"aborted,omitempty"`
}

// plainWriter hides that it writes to a terminal, as decreectl's own
// stdout wrapper (a lock around os.Stdout) does.
type plainWriter struct{ w io.Writer }

func (p plainWriter) Write(b []byte) (int, error) { return p.w.Write(b) }

func runDemo(outPath string) int {
	var out io.Writer = os.Stdout
	if os.Getenv("DECREE_INTERACT_DEMO_WRAP") != "" {
		out = plainWriter{os.Stdout}
	}
	a, err := Ask(context.Background(), Options{
		Routines:       sampleRoutines(),
		DefaultRoutine: "develop",
		ProjectRoot:    os.Getenv("DECREE_INTERACT_DEMO_ROOT"),
		In:             os.Stdin,
		Out:            out,
	})
	res := demoOutcome{Answers: a}
	if err != nil {
		res.Err, res.Aborted = err.Error(), errors.Is(err, ErrAborted)
	}
	data, _ := json.Marshal(res)
	if err := os.WriteFile(outPath, data, 0o644); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// tmuxSession drives the demo program inside a private tmux server.
type tmuxSession struct {
	t      *testing.T
	socket string
}

func (s *tmuxSession) tmux(args ...string) string {
	s.t.Helper()
	cmd := exec.Command("tmux", append([]string{"-L", s.socket}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		s.t.Fatalf("tmux %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

func (s *tmuxSession) capture() string {
	return s.tmux("capture-pane", "-p", "-t", "demo")
}

func (s *tmuxSession) waitFor(text string) {
	s.t.Helper()
	deadline := time.Now().Add(waitLimit)
	for {
		screen := s.capture()
		if strings.Contains(screen, text) {
			return
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("%q never appeared; the pane shows:\n%s", text, screen)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// keys sends tmux key names (Enter, Down, C-d, ...) or literal text (-l).
func (s *tmuxSession) keys(names ...string) {
	s.tmux(append([]string{"send-keys", "-t", "demo"}, names...)...)
}
func (s *tmuxSession) text(t string) { s.tmux("send-keys", "-t", "demo", "-l", t) }

func startTmux(t *testing.T, root string) (*tmuxSession, string) {
	return startTmuxWith(t, root)
}

// startTmuxWith starts the demo with extra VAR=value settings.
func startTmuxWith(t *testing.T, root string, env ...string) (*tmuxSession, string) {
	testtool.Require(t, "tmux")
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	outPath := filepath.Join(t.TempDir(), "outcome.json")
	s := &tmuxSession{t: t, socket: fmt.Sprintf("decree-interact-%d-%d", os.Getpid(), time.Now().UnixNano())}
	// After the program, stty records the terminal mode it left behind.
	command := fmt.Sprintf("env %s=%q DECREE_INTERACT_DEMO_ROOT=%q TERM=xterm-256color %s %q; stty -a > %q; sleep 30",
		demoEnv, outPath, root, strings.Join(env, " "), exe, outPath+".stty")
	s.tmux("new-session", "-d", "-s", "demo", "-x", "100", "-y", "40", command)
	t.Cleanup(func() { _ = exec.Command("tmux", "-L", s.socket, "kill-server").Run() })
	return s, outPath
}

func readOutcome(t *testing.T, path string) demoOutcome {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	for {
		data, err := os.ReadFile(path)
		if err == nil && len(data) > 0 {
			var o demoOutcome
			if err := json.Unmarshal(data, &o); err != nil {
				t.Fatalf("outcome %s: %v", data, err)
			}
			return o
		}
		if time.Now().After(deadline) {
			t.Fatal("the demo program never finished")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestTmuxEndToEnd(t *testing.T) {
	root := t.TempDir()
	s, outPath := startTmux(t, root)

	s.waitFor("develop")
	s.waitFor("type to filter")
	s.text("fxt")
	s.waitFor("fxt")
	screen := s.capture()
	if strings.Contains(screen, "deploy-docs") || !strings.Contains(screen, "fix-types") {
		t.Fatalf("filtering %q should leave fix-types alone; the pane shows:\n%s", "fxt", screen)
	}
	s.keys("Enter")
	s.waitFor("Message name")
	s.text("Add OAuth Login")
	s.keys("Enter")
	s.waitFor("Message name: add-oauth-login")
	s.keys("Enter") // no input file
	s.waitFor("strict (routine default: false)")
	s.keys("Enter")
	s.waitFor("lang (routine default: go)")
	s.text("rust")
	s.keys("Enter")
	s.waitFor("Message body (required)")
	s.text("Add a login page.")
	s.keys("Enter")
	s.text("Use OAuth.")
	s.keys("Enter", "Enter")

	o := readOutcome(t, outPath)
	want := Answers{Routine: "fix-types", Name: "add-oauth-login", Custom: map[string]string{"lang": "rust"},
		Body: "Add a login page.\nUse OAuth."}
	if o.Err != "" || o.Answers == nil || !sameAnswers(*o.Answers, want) {
		t.Fatalf("outcome = %+v, want answers %+v", o, want)
	}
	// The transcript stays on screen after the program ends.
	final := s.capture()
	for _, line := range []string{"Routine: fix-types", "Message name: add-oauth-login", "Input file: (none)", "lang: rust", "│ Use OAuth."} {
		if !strings.Contains(final, line) {
			t.Errorf("final screen lacks %q:\n%s", line, final)
		}
	}
}

func TestTmuxAbortRestoresTerminal(t *testing.T) {
	s, outPath := startTmux(t, t.TempDir())
	s.waitFor("type to filter")
	s.keys("Escape")
	o := readOutcome(t, outPath)
	if !o.Aborted {
		t.Fatalf("outcome = %+v, want aborted", o)
	}
	mode := waitFile(t, outPath+".stty")
	flags := map[string]bool{}
	for _, f := range strings.Fields(mode) {
		flags[f] = true
	}
	for _, flag := range []string{"icanon", "echo", "isig", "icrnl"} {
		if !flags[flag] {
			t.Errorf("terminal left without %s after the abort: stty -a says\n%s", flag, mode)
		}
	}
}

func waitFile(t *testing.T, path string) string {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	for {
		data, err := os.ReadFile(path)
		if err == nil && len(data) > 0 {
			return string(data)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never written", path)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

var update = flag.Bool("update", false, "rewrite testdata/screens.golden from the screens seen")

// TestTmuxNoLeftoversAfterRedraw drives the questions behind a writer that
// hides the terminal (as decreectl's stdout does) and compares the whole
// screen after every keystroke with testdata/screens.golden: a redrawn
// line must not keep the end of the line it replaced ("✔ target_branch:
// developefault: main)").
func TestTmuxNoLeftoversAfterRedraw(t *testing.T) {
	steps := []struct{ keys, text string }{
		{}, // the first screen
		{keys: "Down"}, {keys: "Up"}, {keys: "Enter"},
		{text: "x"}, {text: "1"}, {keys: "BSpace"}, {keys: "Enter"},
		{keys: "Enter"}, // no input file
		{text: "d"}, {text: "e"}, {text: "v"}, {keys: "Enter"},
		{text: "b"}, {keys: "Enter"}, {keys: "Enter"},
	}
	root := t.TempDir()
	s, outPath := startTmuxWith(t, root, "DECREE_INTERACT_DEMO_WRAP=1")
	var golden strings.Builder
	want := readScreens(t)
	for i, st := range steps {
		switch {
		case st.keys != "":
			s.keys(st.keys)
		case st.text != "":
			s.text(st.text)
		}
		name := fmt.Sprintf("step %d: %s%s", i, st.keys, st.text)
		screen := s.settle(want[name])
		fmt.Fprintf(&golden, "### %s\n%s", name, screen)
		if !*update && screen != want[name] {
			t.Fatalf("%s: the screen shows\n%s\nwant\n%s", name, screen, want[name])
		}
	}
	if *update {
		if err := os.WriteFile(filepath.Join("testdata", "screens.golden"), []byte(golden.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if o := readOutcome(t, outPath); o.Answers == nil || o.Answers.Name != "x" || o.Answers.Custom["target_branch"] != "dev" || o.Answers.Body != "b" {
		t.Errorf("outcome %+v", o)
	}
}

// readScreens reads testdata/screens.golden: "### NAME" lines, each
// followed by the screen's non-blank lines (right-trimmed).
func readScreens(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	b, err := os.ReadFile(filepath.Join("testdata", "screens.golden"))
	if err != nil {
		if *update {
			return out
		}
		t.Fatal(err)
	}
	name := ""
	for _, line := range strings.SplitAfter(string(b), "\n") {
		if n, ok := strings.CutPrefix(line, "### "); ok {
			name = strings.TrimSuffix(n, "\n")
			continue
		}
		out[name] += line
	}
	return out
}

// screen is the pane with trailing blanks and blank lines dropped.
func (s *tmuxSession) screen() string {
	var b strings.Builder
	for _, line := range strings.Split(s.capture(), "\n") {
		if line = strings.TrimRight(line, " "); line != "" {
			b.WriteString(line + "\n")
		}
	}
	return b.String()
}

// settle returns the screen once it equals want, or, when it never does
// within the limit (or want is empty, when updating), once it stayed the
// same for a while.
func (s *tmuxSession) settle(want string) string {
	s.t.Helper()
	deadline := time.Now().Add(waitLimit)
	last, same := "", 0
	for {
		cur := s.screen()
		if want != "" && cur == want {
			return cur
		}
		if cur == last {
			same++
		} else {
			last, same = cur, 0
		}
		if (want == "" && same >= 10) || time.Now().After(deadline) {
			return cur
		}
		time.Sleep(20 * time.Millisecond)
	}
}
