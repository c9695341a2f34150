package treedriver

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/decreehq/decree/pkg/config"
	"github.com/decreehq/decree/pkg/driver"
	"github.com/decreehq/decree/pkg/supervisor"
	"github.com/decreehq/decree/pkg/tree/engine"
)

const chart = `Id,Name,Shape Library,Page ID,Line Source,Line Destination,Tags,Status,Text Area 1
1,Document,,,,,,,Driver test
2,Page,,,,,,,Page 1
3,Terminator,,,,,,,Start
4,Process,,,,,NoValidation,,Work on {{message_id}}
5,Terminator,,,,,,,End
6,Line,,,3,4,,,
7,Line,,,4,5,,,
`

// project writes the chart and a stand-in CLI; the settings name it AI.
func project(t *testing.T, cli string) (dir string, settings config.TreeSettings) {
	t.Helper()
	dir = t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "t.tree.csv"), []byte(chart), 0o644); err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(dir, "ai.sh")
	if err := os.WriteFile(script, []byte("#!/usr/bin/env bash\n# stand-in for an AI CLI\n"+cli+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	settings = config.Default().Tree
	settings.CLIs["AI"] = "bash " + script + " <prompt>"
	settings.DefaultCLI = "AI"
	if err := os.MkdirAll(filepath.Join(dir, "run"), 0o755); err != nil {
		t.Fatal(err)
	}
	return dir, settings
}

func task(dir string, settings config.TreeSettings) driver.TaskConfig {
	return driver.TaskConfig{Routine: "t", Path: filepath.Join(dir, "t.tree.csv"), Workdir: dir, MessageDir: filepath.Join(dir, "run"),
		Params: map[string]string{"message_id": "m-1"}, Env: []string{"DECREE_ATTEMPT=2"}, Tree: &settings, KillGrace: time.Second}
}

// TestRunsTheTree: the engine runs as a routine process with the
// attempt's settings; its output streams and tree.json lands in the run
// directory.
func TestRunsTheTree(t *testing.T) {
	dir, settings := project(t, `echo "stand-in got: $1" | head -1; echo '{"completed": true}'`)
	var out bytes.Buffer
	res, err := driver.Run(context.Background(), New(), task(dir, settings), &out)
	if err != nil || !res.Success() {
		t.Fatalf("result %+v, err %v\n%s", res, err, out.String())
	}
	if !strings.Contains(out.String(), "stand-in got: Work on m-1") || !strings.Contains(out.String(), "tree: finished") {
		t.Errorf("output:\n%s", out.String())
	}
	var rep engine.Report
	b, err := os.ReadFile(filepath.Join(dir, "run", "tree.try-002.json")) // attempt 2
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &rep); err != nil || rep.Status != "succeeded" || rep.Attempt != 2 || rep.Chart != "Driver test" || len(rep.Nodes) != 3 || rep.Nodes[0].Type != "start" || rep.Nodes[2].Type != "end" {
		t.Errorf("report %+v (%v)", rep, err)
	}
}

// TestFailureExitsNonZero: a failing step is a failed routine.
func TestFailureExitsNonZero(t *testing.T) {
	dir, settings := project(t, `echo "no json"`)
	var out bytes.Buffer
	res, err := driver.Run(context.Background(), New(), task(dir, settings), &out)
	if err != nil || res.ExitCode != exitFailed {
		t.Fatalf("result %+v, err %v", res, err)
	}
	if !strings.Contains(out.String(), `tree: FAILED: node 4 (row 5) "Work on {{message_id}}": CLI AI: its output holds no JSON`) {
		t.Errorf("output:\n%s", out.String())
	}
}

// TestBrokenTreeFailsAtStart: Start lists the chart's problems.
func TestBrokenTreeFailsAtStart(t *testing.T) {
	dir, settings := project(t, "true")
	settings.DefaultCLI = "NOPE"
	if err := os.WriteFile(filepath.Join(dir, "t.tree.csv"), []byte(chart+"8,Line,,,4,99,,,\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := New().Start(context.Background(), task(dir, settings))
	if err == nil || !strings.Contains(err.Error(), "routine t: decision tree t.tree.csv") || !strings.Contains(err.Error(), "destination 99") {
		t.Fatalf("err = %v", err)
	}
}

// TestStopKillsTheCLI: stopping the routine ends the engine and the CLI
// it runs, with everything the CLI started.
func TestStopKillsTheCLI(t *testing.T) {
	dir, settings := project(t, "")
	pidFile := filepath.Join(dir, "child.pid")
	if err := os.WriteFile(filepath.Join(dir, "ai.sh"), []byte("#!/usr/bin/env bash\nsetsid sleep 300 &\necho $! > "+pidFile+"\nsleep 300\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	h, err := New().Start(context.Background(), task(dir, settings))
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for range h.Events() {
		}
	}()
	deadline := time.Now().Add(30 * time.Second)
	var pid int
	for pid == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the stand-in never started")
		}
		b, _ := os.ReadFile(pidFile)
		pid, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		time.Sleep(10 * time.Millisecond)
	}
	if err := h.Stop(time.Second); err != nil {
		t.Fatal(err)
	}
	res, _ := h.Wait(context.Background())
	if res.Success() || !res.Stopped {
		t.Errorf("result %+v", res)
	}
	if syscall.Kill(pid, 0) == nil {
		t.Errorf("the CLI's detached child %d survived Stop", pid)
	}
}

// TestAttemptTimeout: the routine's own timeout stops the whole tree.
func TestAttemptTimeout(t *testing.T) {
	dir, settings := project(t, "sleep 300")
	cfg := task(dir, settings)
	cfg.Timeout = time.Second
	res, err := driver.Run(context.Background(), New(), cfg, &bytes.Buffer{})
	if err != nil || !res.TimedOut {
		t.Fatalf("result %+v, err %v", res, err)
	}
}

// TestLeaseFence: when the attempt's lease deadline passes without
// renewal, the supervisor kills the engine and every CLI it started.
func TestLeaseFence(t *testing.T) {
	dir, settings := project(t, "")
	pidFile := filepath.Join(dir, "cli.pid")
	if err := os.WriteFile(filepath.Join(dir, "ai.sh"), []byte("#!/usr/bin/env bash\necho $$ > "+pidFile+"\nsleep 300\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := task(dir, settings)
	cfg.Fence = &supervisor.Fence{Lease: supervisor.NewLease(time.Now().Add(2 * time.Second))}
	start := time.Now()
	res, err := driver.Run(context.Background(), New(), cfg, &bytes.Buffer{})
	if err != nil || res.Success() {
		t.Fatalf("result %+v, err %v", res, err)
	}
	if d := time.Since(start); d > 30*time.Second {
		t.Errorf("the lease deadline took %s to end the tree", d)
	}
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	if syscall.Kill(pid, 0) == nil {
		t.Errorf("the CLI %d outlived the lease", pid)
	}
}
