package worker_test

import (
	"github.com/decreehq/decree/internal/testtool"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/decreehq/decree/worker"
)

// A driver plugin in .decree/drivers/ is advertised at registration and
// runs routines that name it, through go-plugin for real.
func TestPluginDriverFromProjectDrivers(t *testing.T) {
	testtool.Require(t, "bash")
	ws := workspace(t, map[string]string{"greet": "echo \"hello from $message_id via plugin\"\n"})
	drivers := filepath.Join(ws, ".decree", "drivers")
	if err := os.MkdirAll(drivers, 0o755); err != nil {
		t.Fatal(err)
	}
	build := exec.Command("go", "build", "-o", filepath.Join(drivers, "decree-driver-testsh"), "./testdata/decree-driver-testsh")
	build.Dir = filepath.Join("..", "pkg", "driver", "plugin")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the test plugin: %v\n%s", err, out)
	}
	fake := newFakeController()
	startServer(t, sockOf(ws), fake)
	a := routineAssignment("lease-plugin", "greet")
	a.Routine.Driver = "testsh"
	fake.assign(a)
	runWorker(t, worker.Options{Workspace: ws})
	c := waitCompletion(t, fake, 30*time.Second)
	if c.GetStatus().GetExitCode() != 0 {
		t.Fatalf("completion = %v", c)
	}
	want := "hello from 2026112107000001-0 via plugin\n"
	if got, _, _ := fake.logOf("lease-plugin", "routine"); string(got) != want {
		t.Errorf("log = %q, want %q", got, want)
	}
	fake.mu.Lock()
	reg := fake.registrations[len(fake.registrations)-1]
	fake.mu.Unlock()
	var names []string
	for _, d := range reg.GetDrivers() {
		names = append(names, d.GetName())
	}
	if !contains(names, "testsh") || !contains(names, "shell") {
		t.Errorf("advertised drivers = %v, want shell and testsh", names)
	}
}

// A routine naming a driver the worker lacks fails with advice.
func TestMissingPluginDriverIsExplained(t *testing.T) {
	testtool.Require(t, "bash")
	ws := workspace(t, map[string]string{"greet": "echo hi\n"})
	fake := newFakeController()
	startServer(t, sockOf(ws), fake)
	a := routineAssignment("lease-missing", "greet")
	a.Routine.Driver = "nosuchdriver"
	fake.assign(a)
	runWorker(t, worker.Options{Workspace: ws})
	c := waitCompletion(t, fake, 20*time.Second)
	if c.GetStatus().GetExitCode() != -1 || !containsStr(c.GetStatus().GetError(), "decree-driver-nosuchdriver") {
		t.Fatalf("completion = %v, want a failure naming decree-driver-nosuchdriver", c)
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

func containsStr(s, sub string) bool { return strings.Contains(s, sub) }
