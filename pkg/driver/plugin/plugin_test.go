package plugin

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/decreehq/decree/pkg/driver"
	"github.com/decreehq/decree/pkg/driver/internal/drivertest"
	"github.com/decreehq/decree/pkg/fsutil"
	"github.com/decreehq/decree/pkg/routine"
	"github.com/decreehq/decree/pkg/supervisor"
)

var (
	buildOnce sync.Once
	binDir    string
	buildErr  error
)

// pluginDir builds testdata/decree-driver-testsh once per test binary.
func pluginDir(t *testing.T) string {
	t.Helper()
	drivertest.RequireTool(t, "go")
	drivertest.RequireTool(t, "bash")
	buildOnce.Do(func() {
		binDir, buildErr = os.MkdirTemp("", "decree-plugin-test-")
		if buildErr != nil {
			return
		}
		out, err := exec.Command("go", "build", "-o", filepath.Join(binDir, BinaryPrefix+"testsh"), "./testdata/decree-driver-testsh").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binDir
}

func TestMain(m *testing.M) {
	if bin := os.Getenv(hostEnv); bin != "" {
		testHost(bin)
		return
	}
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

func launch(t *testing.T) *Driver {
	t.Helper()
	p, err := Find("testsh", []string{t.TempDir(), pluginDir(t)})
	if err != nil {
		t.Fatal(err)
	}
	d, err := Launch(context.Background(), p, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Close)
	return d
}

func script(t *testing.T, body string) (dir, path string) {
	t.Helper()
	dir = t.TempDir()
	path = filepath.Join(dir, "r.sh")
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir, path
}

func TestPluginRunsRoutine(t *testing.T) {
	d := launch(t)
	if d.Name() != "testsh" || d.Version() != "test" || len(d.Extensions()) != 1 {
		t.Fatalf("describe: %q %q %v", d.Name(), d.Version(), d.Extensions())
	}
	dir, path := script(t, "# Test routine\ntarget_branch=\"${target_branch:-dev}\"\nstarted_in=\"${started_in:-$(pwd)}\"\nfor i in $(seq 1 200); do echo out$i; echo err$i >&2; done\nprintf '\\000\\377'\necho \"tb=$target_branch hook=$DECREE_HOOK cwd=$(pwd)\"\nexit 3\n")
	desc, params, err := d.Inspect(context.Background(), path)
	wantParams := []routine.Param{{Name: "target_branch", Default: "dev", HasDefault: true}, {Name: "started_in"}}
	if err != nil || desc != "Test routine" || !reflect.DeepEqual(params, wantParams) {
		t.Errorf("Inspect = %q %+v %v; want %+v (a computed default travels as no default)", desc, params, err, wantParams)
	}
	h, err := d.Start(context.Background(), driver.TaskConfig{
		Routine: "r", Path: path, Workdir: dir,
		Params: map[string]string{"target_branch": "main"}, Env: []string{"DECREE_HOOK=afterEach"},
	})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	var exit *driver.ExitResult
	for ev := range h.Events() {
		if ev.Kind == driver.EventOutput {
			out.Write(ev.Data)
		} else {
			exit = &ev.Exit
		}
	}
	var want bytes.Buffer
	for i := 1; i <= 200; i++ {
		fmt.Fprintf(&want, "out%d\nerr%d\n", i, i)
	}
	fmt.Fprintf(&want, "\x00\xfftb=main hook=afterEach cwd=%s\n", dir)
	if !bytes.Equal(out.Bytes(), want.Bytes()) {
		t.Errorf("output through the plugin differs:\n got %q\nwant %q", tail(out.String()), tail(want.String()))
	}
	if exit == nil || exit.ExitCode != 3 || exit.Err != nil {
		t.Errorf("exit = %+v", exit)
	}
	res, err := h.Wait(context.Background())
	if err != nil || res.ExitCode != 3 {
		t.Errorf("Wait = %+v, %v", res, err)
	}
	// Sink mode through driver.Run, and a clean exit.
	_, path = script(t, "echo hello\n")
	var sink bytes.Buffer
	res, err = driver.Run(context.Background(), d, driver.TaskConfig{Routine: "r", Path: path, Workdir: dir}, &sink)
	if err != nil || !res.Success() || sink.String() != "hello\n" {
		t.Errorf("sink run: %+v %v %q", res, err, sink.String())
	}
}

func tail(s string) string {
	if len(s) > 80 {
		return "..." + s[len(s)-80:]
	}
	return s
}

// Stop, timeout and plugin shutdown all kill the routine's whole group.
func TestPluginLeavesNoProcess(t *testing.T) {
	tests := []struct {
		name    string
		body    string
		timeout time.Duration
		action  string // stop, timeout, close
	}{
		{"stop", "sleep 1000 &\necho $! > \"$pidfile\"\nwait\n", 0, "stop"},
		{"stop ignoring TERM", "trap '' TERM\nsleep 1000 &\necho $! > \"$pidfile\"\nwhile :; do sleep 0.05; done\n", 0, "stop"},
		{"timeout", "sleep 1000 &\necho $! > \"$pidfile\"\nwait\n", 300 * time.Millisecond, "timeout"},
		{"plugin shutdown", "trap '' TERM\nsleep 1000 &\necho $! > \"$pidfile\"\nwhile :; do sleep 0.05; done\n", 0, "close"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := launch(t)
			dir, path := script(t, tt.body)
			pidfile := filepath.Join(dir, "pid")
			h, err := d.Start(context.Background(), driver.TaskConfig{
				Routine: "r", Path: path, Workdir: dir, Timeout: tt.timeout,
				Params: map[string]string{"pidfile": pidfile}, Output: &bytes.Buffer{},
			})
			if err != nil {
				t.Fatal(err)
			}
			pid := drivertest.WaitPidFile(t, pidfile, 10*time.Second)
			switch tt.action {
			case "stop":
				if err := h.Stop(300 * time.Millisecond); err != nil {
					t.Fatal(err)
				}
			case "close":
				d.Close()
			}
			ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
			defer cancel()
			res, err := h.Wait(ctx)
			if err != nil {
				t.Fatal(err)
			}
			switch tt.action {
			case "stop":
				if !res.Stopped || res.Success() {
					t.Errorf("result %+v", res)
				}
			case "timeout":
				if !res.TimedOut || res.ExitCode != 1 || !strings.Contains(res.Message, "timed out after 300ms") {
					t.Errorf("result %+v", res)
				}
			case "close":
				if res.Success() {
					t.Errorf("result %+v", res)
				}
			}
			if !drivertest.WaitDead(pid, 5*time.Second) {
				t.Errorf("background process %d survived %s", pid, tt.action)
			}
		})
	}
}

// A plugin that dies mid-run ends the execution with a clear driver error.
func TestPluginCrashMidRun(t *testing.T) {
	d := launch(t)
	dir, path := script(t, "sleep 1000 &\necho $! > \"$pidfile\"\necho ready\nwait\n")
	crash := filepath.Join(dir, "crash")
	pidfile := filepath.Join(dir, "pid")
	h, err := d.Start(context.Background(), driver.TaskConfig{
		Routine: "r", Path: path, Workdir: dir,
		Params: map[string]string{"crash_file": crash, "pidfile": pidfile},
	})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	var exit driver.ExitResult
	for ev := range h.Events() {
		if ev.Kind == driver.EventOutput {
			out.Write(ev.Data)
			if strings.Contains(out.String(), "ready\n") {
				os.WriteFile(crash, nil, 0o644)
			}
		} else {
			exit = ev.Exit
		}
	}
	// The plugin died without cleaning up; the routine's supervisor sees
	// its control pipe close and kills the tree (the host also kills the
	// group from the pid it reported at start).
	pid := drivertest.WaitPidFile(t, pidfile, 5*time.Second)
	if !drivertest.WaitDead(pid, 5*time.Second) {
		exec.Command("kill", "-9", fmt.Sprint(pid)).Run()
		t.Errorf("background process %d of the routine survived its plugin's crash", pid)
	}
	if exit.ExitCode != -1 || exit.Err == nil || !strings.Contains(exit.Err.Error(), "testsh") || exit.Success() {
		t.Errorf("exit after plugin crash = %+v; want ExitCode -1 and an error naming the driver", exit)
	}
	for end := time.Now().Add(5 * time.Second); !d.Exited() && time.Now().Before(end); {
		time.Sleep(5 * time.Millisecond)
	}
	if !d.Exited() {
		t.Errorf("plugin process still running after its crash")
	}
}

func TestPluginWrongProtocolVersion(t *testing.T) {
	dir := pluginDir(t)
	t.Setenv("DECREE_TEST_PROTOCOL_VERSION", "99")
	p := filepath.Join(dir, BinaryPrefix+"testsh")
	_, err := Launch(context.Background(), p, nil)
	if err == nil || !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), "protocol version") {
		t.Errorf("err = %v; want an error naming the binary and the protocol version", err)
	}
}

func TestNotAPlugin(t *testing.T) {
	drivertest.RequireTool(t, "bash")
	dir := t.TempDir()
	p := filepath.Join(dir, BinaryPrefix+"bogus")
	os.WriteFile(p, []byte("#!/bin/bash\necho hello there\n"), 0o755)
	start := time.Now()
	_, err := Launch(context.Background(), p, nil)
	if err == nil || !strings.Contains(err.Error(), p) {
		t.Errorf("err = %v; want an error naming the binary", err)
	}
	if time.Since(start) > 20*time.Second {
		t.Errorf("took %s to reject a non-plugin", time.Since(start))
	}
}

func TestFind(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	os.WriteFile(filepath.Join(a, BinaryPrefix+"x"), []byte("#!/bin/sh\n"), 0o644) // not executable: skipped
	os.WriteFile(filepath.Join(b, BinaryPrefix+"x"), []byte("#!/bin/sh\n"), 0o755)
	got, err := Find("x", []string{a, b})
	if err != nil || got != filepath.Join(b, BinaryPrefix+"x") {
		t.Errorf("Find = %q, %v", got, err)
	}
	if _, err := Find("missing", []string{a, "$PATH"}); err == nil || !strings.Contains(err.Error(), a) {
		t.Errorf("missing driver: %v", err)
	}
	for _, bad := range []string{"../x", "a/b", ""} {
		if _, err := Find(bad, []string{a}); !errors.Is(err, fsutil.ErrUnsafePath) {
			t.Errorf("Find(%q) = %v, want ErrUnsafePath", bad, err)
		}
	}
	dirs := SearchDirs("/proj")
	if len(dirs) != 3 || dirs[1] != "$PATH" || dirs[2] != "/proj/.decree/drivers" {
		t.Errorf("SearchDirs = %v", dirs)
	}
}

// The host's kill grace reaches the plugin: a routine that ignores SIGTERM
// past its timeout is killed after the configured grace, well before the
// default one.
func TestPluginKillGrace(t *testing.T) {
	d := launch(t)
	dir, path := script(t, "trap '' TERM\nwhile :; do sleep 0.05; done\n")
	start := time.Now()
	res, err := driver.Run(context.Background(), d, driver.TaskConfig{
		Routine: "r", Path: path, Workdir: dir,
		Timeout: 200 * time.Millisecond, KillGrace: 200 * time.Millisecond,
	}, &bytes.Buffer{})
	took := time.Since(start)
	if err != nil || !res.TimedOut || res.ExitCode != 1 {
		t.Fatalf("result %+v, %v; want a timeout", res, err)
	}
	if took >= driver.DefaultKillGrace {
		t.Errorf("took %s: the 200ms kill grace was not used (default is %s)", took, driver.DefaultKillGrace)
	}
}

// A plugin's routine is fenced by the host's lease like a built-in one:
// renewals passed on by RenewLease keep it running; when they stop, the
// plugin's supervisor kills the whole tree, a setsid child included,
// without any word from the host (as when the worker is stopped).
func TestPluginFollowsLease(t *testing.T) {
	drivertest.RequireTool(t, "setsid")
	d := launch(t)
	dir, path := script(t, "setsid bash -c 'echo $$ > \"$pidfile\"; exec sleep 1000' &\nsleep 1000\n")
	pidfile := filepath.Join(dir, "pid")
	lease := supervisor.NewLease(time.Now().Add(400 * time.Millisecond))
	h, err := d.Start(context.Background(), driver.TaskConfig{
		Routine: "r", Path: path, Workdir: dir, Output: &bytes.Buffer{},
		Params: map[string]string{"pidfile": pidfile},
		Fence:  &supervisor.Fence{Lease: lease},
	})
	if err != nil {
		t.Fatal(err)
	}
	pid := drivertest.WaitPidFile(t, pidfile, 10*time.Second)
	t.Cleanup(func() { _ = exec.Command("kill", "-9", fmt.Sprint(pid)).Run() })
	renew := time.NewTicker(100 * time.Millisecond)
	defer renew.Stop()
	for until := time.Now().Add(800 * time.Millisecond); time.Now().Before(until); <-renew.C { // twice the lease
		if !drivertest.Alive(pid) {
			t.Fatal("the routine died although its lease was renewed")
		}
		lease.Extend(time.Now().Add(400 * time.Millisecond))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := h.Wait(ctx)
	if err != nil {
		_ = h.Stop(time.Second)
		t.Fatalf("the routine outlived its lease by 10s: %v", err)
	}
	if res.Success() {
		t.Fatalf("result %+v; want the routine killed", res)
	}
	if drivertest.Alive(pid) {
		t.Errorf("the setsid child %d outlived the lease", pid)
	}
}

// hostEnv makes the test binary a plugin host (testHost) that the test
// can kill -9.
const hostEnv = "PLUGIN_TEST_HOST"

// testHost launches the plugin at bin, runs the routine file named by
// $PLUGIN_TEST_ROUTINE, prints "ready" and waits to be killed.
func testHost(bin string) {
	d, err := Launch(context.Background(), bin, nil)
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	path := os.Getenv("PLUGIN_TEST_ROUTINE")
	if _, err := d.Start(context.Background(), driver.TaskConfig{Routine: "r", Path: path, Workdir: filepath.Dir(path), Output: io.Discard}); err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	fmt.Println("ready", d.client.ReattachConfig().Pid)
	select {}
}

// When the host dies (kill -9), the plugin exits (go-plugin alone would
// leave it running, orphaned) and every process of the routines it ran is
// killed, a setsid child included.
func TestHostDeathEndsPluginRoutines(t *testing.T) {
	drivertest.RequireTool(t, "setsid")
	bin := filepath.Join(pluginDir(t), BinaryPrefix+"testsh")
	dir, path := script(t, "")
	pidfile := filepath.Join(dir, "pid")
	os.WriteFile(path, []byte("setsid bash -c 'echo $$ > "+pidfile+"; exec sleep 1000' &\nsleep 1000\n"), 0o644)
	host := exec.Command(os.Args[0])
	host.Env = append(os.Environ(), hostEnv+"="+bin, "PLUGIN_TEST_ROUTINE="+path)
	out, err := host.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := host.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = host.Process.Kill(); _ = host.Wait() })
	line, _ := bufio.NewReader(out).ReadString('\n')
	var pluginPid int
	if _, err := fmt.Sscanf(line, "ready %d", &pluginPid); err != nil {
		t.Fatalf("host: %q", line)
	}
	pid := drivertest.WaitPidFile(t, pidfile, 10*time.Second)
	t.Cleanup(func() { _ = exec.Command("kill", "-9", fmt.Sprint(pid)).Run() })
	_ = host.Process.Kill()
	if !drivertest.WaitDead(pid, 5*time.Second) {
		t.Errorf("the setsid child %d of a plugin routine outlived the host", pid)
	}
	if !drivertest.WaitDead(pluginPid, 5*time.Second) {
		_ = exec.Command("kill", "-9", fmt.Sprint(pluginPid)).Run()
		t.Errorf("the plugin %d outlived its host", pluginPid)
	}
}
