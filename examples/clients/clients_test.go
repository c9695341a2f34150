// Package clients tests the example clients in other languages against a
// real controller and worker (separate processes) reached over TCP on
// loopback with token auth: each client submits a message, follows it to
// its end, and fetches changes.diff and run.json; what it reports must equal
// what decreectl reports for the same message.
package clients

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/decreehq/decree/internal/testtool"
)

func TestMain(m *testing.M) {
	code := m.Run()
	testtool.Cleanup()
	os.Exit(code)
}

// summary is the JSON a client writes with --out.
type summary struct {
	ID       string         `json:"id"`
	Chain    string         `json:"chain"`
	State    string         `json:"state"`
	Reason   string         `json:"reason"`
	Attempts int            `json:"attempts"`
	Events   []string       `json:"events"`
	Log      string         `json:"log"`
	Diff     string         `json:"diff"`
	Run      map[string]any `json:"run"`
}

// editRoutine prints two lines and changes a file of the project.
const editRoutine = `#!/usr/bin/env bash
# Append a line to notes.txt (a stand-in for an AI routine)
set -euo pipefail
message_id="${message_id:-}"
echo "editing for $message_id"
echo "second line"
printf 'hello from %s\n' "$message_id" >> notes.txt
`

func project(t *testing.T) string {
	t.Helper()
	testtool.Require(t, "bash")
	p := testtool.InitProject(t)
	if err := os.WriteFile(filepath.Join(p, ".decree", "routines", "edit.sh"), []byte(editRoutine), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(p, "notes.txt"), []byte("notes\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// runClient runs a client command against the cluster and checks its
// results against decreectl's.
func runClient(t *testing.T, c *testtool.Cluster, name string, argv ...string) {
	t.Helper()
	out := filepath.Join(t.TempDir(), "result.json")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], append(argv[1:], "--routine", "edit", "--name", "from-"+name, "--body", "Append a note", "--out", out)...)
	cmd.Env = append(testtool.CleanEnv(), "DECREE_CONTROLLER="+c.Addr, "DECREE_TOKEN_FILE="+c.ClientTokenFile)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s client: %v\n--- stdout\n%s--- stderr\n%s", name, err, stdout.String(), stderr.String())
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var s summary
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatalf("%s: %v\n%s", out, err, b)
	}
	if s.State != "MESSAGE_STATE_DONE" || s.Attempts != 1 || s.Reason != "" {
		t.Errorf("outcome %s after %d attempts (%q)", s.State, s.Attempts, s.Reason)
	}
	want := "MESSAGE_QUEUED MESSAGE_STARTED ATTEMPT_STARTED ATTEMPT_FINISHED MESSAGE_DONE"
	if got := strings.TrimSpace(strings.ReplaceAll(strings.Join(s.Events, " "), "EVENT_KIND_", "")); got != want {
		t.Errorf("events %s, want %s", got, want)
	}
	// The log was printed live and matches what decreectl shows.
	if wantLog := "editing for " + s.ID + "\nsecond line\n"; s.Log != wantLog || stdout.String() != wantLog {
		t.Errorf("log %q, stdout %q, want %q", s.Log, stdout.String(), wantLog)
	}
	ctlLog, _, code := c.Ctl(ctx, "logs", s.ID)
	if code != 0 || ctlLog != s.Log {
		t.Errorf("decreectl logs: %q (exit %d), client: %q", ctlLog, code, s.Log)
	}
	ctlDiff, _, code := c.Ctl(ctx, "diff", s.ID)
	if code != 0 || ctlDiff != s.Diff || !strings.Contains(s.Diff, "+hello from "+s.ID) {
		t.Errorf("decreectl diff (exit %d):\n%s\nclient diff:\n%s", code, ctlDiff, s.Diff)
	}
	runsJSON, _, code := c.Ctl(ctx, "-o", "json", "runs", "--chain", s.Chain)
	var runs struct {
		Runs []map[string]any `json:"runs"`
	}
	if err := json.Unmarshal([]byte(runsJSON), &runs); code != 0 || err != nil || len(runs.Runs) != 1 {
		t.Fatalf("decreectl runs: exit %d, %v\n%s", code, err, runsJSON)
	}
	r := runs.Runs[0]
	pairs := []struct{ what, ctl, client string }{
		{"message id", str(r["messageId"]), str(s.Run["message_id"])},
		{"routine", str(r["routine"]), str(s.Run["routine"])},
		{"outcome", strings.ToLower(strings.TrimPrefix(str(r["outcome"]), "RUN_OUTCOME_")), str(s.Run["outcome"])},
		{"attempts", str(r["attempts"]), str(s.Run["attempts"])},
		{"exit code", str(orZero(r["exitCode"])), str(s.Run["exit_code"])},
	}
	for _, p := range pairs {
		if p.ctl != p.client {
			t.Errorf("%s: decreectl says %q, the client's run.json %q", p.what, p.ctl, p.client)
		}
	}
	if str(s.Run["message_id"]) != s.ID {
		t.Errorf("run.json is of %v, not %s", s.Run["message_id"], s.ID)
	}
}

func str(v any) string { return fmt.Sprint(v) }

// orZero is protojson's omitted zero.
func orZero(v any) any {
	if v == nil {
		return 0
	}
	return v
}

// TestNodeClient runs examples/clients/node (npm ci first when its
// node_modules is missing).
func TestNodeClient(t *testing.T) {
	node := testtool.Require(t, "node")
	dir := filepath.Join(testtool.ModuleRoot(), "examples", "clients", "node")
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@grpc", "grpc-js")); err != nil {
		npm := testtool.Require(t, "npm")
		cmd := exec.Command(npm, "ci", "--no-audit", "--no-fund")
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			testtool.Unavailable(t, "npm ci in examples/clients/node", fmt.Errorf("%v\n%s", err, out))
		}
	}
	c := testtool.StartCluster(t, project(t))
	runClient(t, c, "node", node, filepath.Join(dir, "client.js"))
}

// TestPythonClient runs examples/clients/python with Debian's grpcio and
// grpc-tools; the stubs are generated into a temporary directory.
func TestPythonClient(t *testing.T) {
	py := pythonWithGRPC(t)
	c := testtool.StartCluster(t, project(t))
	runClient(t, c, "python", py, filepath.Join(testtool.ModuleRoot(), "examples", "clients", "python", "client.py"))
}

// pythonWithGRPC finds a python3 that imports grpc and grpc_tools: the one
// on PATH, else the system's (Debian's packages install there, which a
// pyenv or venv python3 on PATH does not see).
func pythonWithGRPC(t *testing.T) string {
	t.Helper()
	var tried []string
	for _, c := range []string{"python3", "/usr/bin/python3"} {
		p, err := exec.LookPath(c)
		if err != nil {
			continue
		}
		out, err := exec.Command(p, "-c", "import grpc, grpc_tools.protoc").CombinedOutput()
		if err == nil {
			return p
		}
		tried = append(tried, fmt.Sprintf("%s: %s", p, strings.TrimSpace(string(out))))
	}
	testtool.Unavailable(t, "python3 with grpcio and grpc-tools (apt-get install python3-grpcio python3-grpc-tools)", errors.New(strings.Join(tried, "; ")))
	return ""
}
