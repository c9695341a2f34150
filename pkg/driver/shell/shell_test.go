package shell

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/decreehq/decree/pkg/driver"
	"github.com/decreehq/decree/pkg/driver/internal/drivertest"
	"github.com/decreehq/decree/pkg/routine"
)

// project makes a project root with .decree/routines/NAME.sh and a run
// directory, returning the root, the resolved routine and the run dir.
func project(t *testing.T, name, script string) (string, routine.Routine, string) {
	t.Helper()
	drivertest.RequireTool(t, "bash")
	root := t.TempDir()
	rdir := filepath.Join(root, ".decree", "routines")
	msgDir := filepath.Join(root, ".decree", "runs", "2025022514320000-0")
	for _, d := range []string{rdir, msgDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// 0644 on purpose: decree runs `bash FILE`, so no executable bit is needed.
	if err := os.WriteFile(filepath.Join(rdir, name+".sh"), []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := routine.Library{Dir: rdir}.Resolve(name)
	if err != nil {
		t.Fatal(err)
	}
	return root, r, msgDir
}

func standard(root, msgDir string) map[string]string {
	return map[string]string{
		"spec_file":    "",
		"message_file": filepath.Join(msgDir, "message.md"),
		"message_id":   "2025022514320000-0",
		"message_dir":  msgDir,
		"chain":        "2025022514320000",
		"seq":          "0",
	}
}

func run(t *testing.T, cfg driver.TaskConfig) (driver.ExitResult, string) {
	t.Helper()
	var out bytes.Buffer
	res, err := driver.Run(context.Background(), New(), cfg, &out)
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	return res, out.String()
}

const prReview = `#!/usr/bin/env bash
# PR Review routine
set -euo pipefail

spec_file="${spec_file:-}"
message_file="${message_file:-}"
message_id="${message_id:-}"
message_dir="${message_dir:-}"
chain="${chain:-}"
seq="${seq:-}"
target_branch="${target_branch:-default-branch}"   # Custom parameter

echo "target_branch=$target_branch"
echo "env_target=${target_branch-}"
echo "unknown_field=${unknown_field-<unset>}"
echo "message_id=$message_id chain=$chain seq=$seq"
echo "bash=${BASH_VERSION:+yes}"
`

// Spec 06: custom variables reach shell routines as environment variables;
// undeclared frontmatter fields are ignored; missing ones keep the default.
func TestCustomVariables(t *testing.T) {
	root, r, msgDir := project(t, "pr-review", prReview)
	custom, err := r.CustomParams()
	if err != nil {
		t.Fatal(err)
	}
	if len(custom) != 1 || custom[0].Name != "target_branch" {
		t.Fatalf("custom params = %+v, want target_branch", custom)
	}
	tests := []struct {
		name   string
		fields map[string]string
		want   []string
	}{
		{"value from frontmatter", map[string]string{"target_branch": "main", "unknown_field": "value"},
			[]string{"target_branch=main\n", "unknown_field=<unset>\n"}},
		{"missing uses routine default", map[string]string{"unknown_field": "value"},
			[]string{"target_branch=default-branch\n", "unknown_field=<unset>\n"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			params := standard(root, msgDir)
			for k, v := range routine.SelectCustom(custom, tt.fields) {
				params[k] = v
			}
			res, out := run(t, driver.TaskConfig{Routine: r.Name, Path: r.Path, Workdir: root, Params: params, MessageDir: msgDir})
			if !res.Success() {
				t.Fatalf("routine failed: %+v\n%s", res, out)
			}
			for _, w := range tt.want {
				if !strings.Contains(out, w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
			if !strings.Contains(out, "message_id=2025022514320000-0 chain=2025022514320000 seq=0\n") || !strings.Contains(out, "bash=yes") {
				t.Errorf("standard parameters or bash missing:\n%s", out)
			}
		})
	}
}

// Spec 06: a shell routine runs via bash in the project root; routine.log
// holds combined stdout/stderr; no notebook artefacts appear.
func TestShellRunWritesRoutineLogOnly(t *testing.T) {
	script := "echo out1\necho err1 >&2\necho \"cwd=$(pwd)\"\nif read -r line; then echo \"stdin=$line\"; else echo stdin-eof; fi\necho \"hook=$DECREE_HOOK\"\n"
	root, r, msgDir := project(t, "develop", script)
	logPath := filepath.Join(msgDir, "routine.log")
	f, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	res, err := driver.Run(context.Background(), New(), driver.TaskConfig{
		Routine: r.Name, Path: r.Path, Workdir: root, Params: standard(root, msgDir), MessageDir: msgDir,
		Env: []string{"DECREE_HOOK=beforeEach"},
	}, f)
	f.Close()
	if err != nil || !res.Success() || res.Message != "exit code 0" {
		t.Fatalf("run: %+v, %v", res, err)
	}
	got, _ := os.ReadFile(logPath)
	want := fmt.Sprintf("out1\nerr1\ncwd=%s\nstdin-eof\nhook=beforeEach\n", root)
	if string(got) != want {
		t.Errorf("routine.log = %q, want %q", got, want)
	}
	// Spec 06: shell routines never need (or create) the notebook venv.
	if _, err := os.Stat(filepath.Join(root, ".decree", "venv")); err == nil {
		t.Errorf("a shell routine run created .decree/venv")
	}
	for _, name := range []string{"output.ipynb", "papermill.log"} {
		if _, err := os.Stat(filepath.Join(msgDir, name)); err == nil {
			t.Errorf("%s was created for a shell routine", name)
		}
	}
}

// Output arrives as exact bytes, stdout and stderr interleaved in order,
// through the event stream.
func TestEventsOrderAndBytes(t *testing.T) {
	script := "for i in $(seq 1 300); do echo out$i; echo err$i >&2; done\nprintf '\\000\\001\\377end'\nexit 3\n"
	root, r, _ := project(t, "order", script)
	h, err := New().Start(context.Background(), driver.TaskConfig{Routine: r.Name, Path: r.Path, Workdir: root})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	var exits []driver.ExitResult
	for ev := range h.Events() {
		switch ev.Kind {
		case driver.EventOutput:
			if len(exits) > 0 {
				t.Fatal("output after exit event")
			}
			out.Write(ev.Data)
		case driver.EventExit:
			exits = append(exits, ev.Exit)
		}
	}
	var want bytes.Buffer
	for i := 1; i <= 300; i++ {
		fmt.Fprintf(&want, "out%d\nerr%d\n", i, i)
	}
	want.WriteString("\x00\x01\xffend")
	if !bytes.Equal(out.Bytes(), want.Bytes()) {
		t.Errorf("output differs from the expected interleaving (%d vs %d bytes)", out.Len(), want.Len())
	}
	if len(exits) != 1 || exits[0].ExitCode != 3 || exits[0].Success() {
		t.Fatalf("exit events = %+v, want one with code 3", exits)
	}
	res, err := h.Wait(context.Background())
	if err != nil || res.ExitCode != 3 || res.Message != "exit code 3" {
		t.Errorf("Wait = %+v, %v", res, err)
	}
}

// A routine that starts `sleep 1000 &` leaves nothing behind after Stop,
// after a timeout, or after it simply exits; SIGKILL follows when SIGTERM
// is ignored.
func TestNoProcessLeftBehind(t *testing.T) {
	tests := []struct {
		name      string
		script    string
		timeout   time.Duration
		stop      bool
		wantCode  int
		wantInMsg string
	}{
		{"stop", "sleep 1000 &\necho $! > \"$pidfile\"\nwait\n", 0, true, 128 + 15, "stopped"},
		{"stop with SIGTERM ignored", "trap '' TERM\nsleep 1000 &\necho $! > \"$pidfile\"\nwhile :; do sleep 0.05; done\n", 0, true, 128 + 9, "signal 9"},
		{"timeout", "sleep 1000 &\necho $! > \"$pidfile\"\nwait\n", 300 * time.Millisecond, false, 1, "timed out after 300ms"},
		{"timeout with SIGTERM ignored", "trap '' TERM\nsleep 1000 &\necho $! > \"$pidfile\"\nwhile :; do sleep 0.05; done\n", 300 * time.Millisecond, false, 1, "timed out after 300ms"},
		{"exits leaving a child", "sleep 1000 &\necho $! > \"$pidfile\"\necho bye\n", 0, false, 0, "exit code 0"},
		{"child ignoring TERM after exit", "(trap '' TERM; exec sleep 1000) &\necho $! > \"$pidfile\"\n", 0, false, 0, "exit code 0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root, r, _ := project(t, "bg", tt.script)
			pidfile := filepath.Join(t.TempDir(), "pid")
			h, err := New().Start(context.Background(), driver.TaskConfig{
				Routine: r.Name, Path: r.Path, Workdir: root, Timeout: tt.timeout,
				KillGrace: 300 * time.Millisecond, Env: []string{"pidfile=" + pidfile},
				Output: &bytes.Buffer{},
			})
			if err != nil {
				t.Fatal(err)
			}
			pid := drivertest.WaitPidFile(t, pidfile, 5*time.Second)
			if tt.stop {
				if err := h.Stop(300 * time.Millisecond); err != nil {
					t.Fatal(err)
				}
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			res, err := h.Wait(ctx)
			if err != nil {
				t.Fatalf("Wait: %v", err)
			}
			if res.ExitCode != tt.wantCode || !strings.Contains(res.Message, tt.wantInMsg) {
				t.Errorf("result %+v, want code %d and message containing %q", res, tt.wantCode, tt.wantInMsg)
			}
			if tt.timeout > 0 && (!res.TimedOut || res.Success()) {
				t.Errorf("timeout not reported: %+v", res)
			}
			if !drivertest.WaitDead(pid, 5*time.Second) {
				t.Errorf("background process %d survived", pid)
			}
		})
	}
}

func TestBadScripts(t *testing.T) {
	root, r, _ := project(t, "crlf", "#!/bin/bash\r\necho hi\r\n")
	_, err := New().Start(context.Background(), driver.TaskConfig{Routine: r.Name, Path: r.Path, Workdir: root})
	if err == nil || !strings.Contains(err.Error(), "crlf") || !strings.Contains(err.Error(), "CRLF") {
		t.Errorf("CRLF script: err = %v, want an error naming the routine and CRLF", err)
	}
	root, r, _ = project(t, "ok", "echo \"$p\"\n")
	for _, params := range []map[string]string{{"a=b": "x"}, {"1x": "x"}, {"p": "nul\x00"}} {
		_, err = New().Start(context.Background(), driver.TaskConfig{Routine: r.Name, Path: r.Path, Workdir: root, Params: params})
		if err == nil || !strings.Contains(err.Error(), "ok") {
			t.Errorf("params %q: err = %v, want a clear error", params, err)
		}
	}
	_, err = New().Start(context.Background(), driver.TaskConfig{Routine: "gone", Path: filepath.Join(root, "gone.sh"), Workdir: root})
	if err == nil || !strings.Contains(err.Error(), "gone") {
		t.Errorf("missing script: err = %v", err)
	}
}

// A failing sink is reported as a driver error, and the routine still ends.
func TestFailingSink(t *testing.T) {
	root, r, _ := project(t, "loud", "yes | head -c 1000000\n")
	res, err := driver.Run(context.Background(), New(), driver.TaskConfig{Routine: r.Name, Path: r.Path, Workdir: root}, failWriter{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Err == nil || res.Success() {
		t.Errorf("result %+v should carry the sink error", res)
	}
}

type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, fmt.Errorf("disk full") }
