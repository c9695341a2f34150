package interact

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/decreehq/decree/internal/testtool"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
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

func runDemo(outPath string) int {
	a, err := Ask(context.Background(), Options{
		Routines:       sampleRoutines(),
		DefaultRoutine: "develop",
		ProjectRoot:    os.Getenv("DECREE_INTERACT_DEMO_ROOT"),
		In:             os.Stdin,
		Out:            os.Stdout,
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
	testtool.Require(t, "tmux")
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	outPath := filepath.Join(t.TempDir(), "outcome.json")
	s := &tmuxSession{t: t, socket: fmt.Sprintf("decree-interact-%d-%d", os.Getpid(), time.Now().UnixNano())}
	// After the program, stty records the terminal mode it left behind.
	command := fmt.Sprintf("env %s=%q DECREE_INTERACT_DEMO_ROOT=%q TERM=xterm-256color %q; stty -a > %q; sleep 30",
		demoEnv, outPath, root, exe, outPath+".stty")
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
