package worker_test

import (
	"bytes"
	"context"
	"fmt"
	"github.com/decreehq/decree/internal/testtool"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	decreev1 "github.com/decreehq/decree/proto/decree/v1"
	"github.com/decreehq/decree/worker"
	"github.com/decreehq/decree/worker/backoff"
)

const instanceID = "inst-0123"

// workspace makes a project directory with .decree/instance-id and the given
// routines (name -> bash source) under .decree/routines/.
func workspace(t testing.TB, routines map[string]string) string {
	t.Helper()
	ws := t.TempDir()
	dir := filepath.Join(ws, ".decree", "routines")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, ".decree", "instance-id"), []byte(instanceID+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for name, src := range routines {
		if err := os.WriteFile(filepath.Join(dir, name+".sh"), []byte(src), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return ws
}

func sockOf(ws string) string { return filepath.Join(ws, ".decree", "decree.sock") }

type running struct {
	cancel context.CancelFunc
	done   chan error
}

// runWorker starts worker.Run with fast retries; the worker is stopped at
// the end of the test.
func runWorker(t testing.TB, opts worker.Options) *running {
	t.Helper()
	if opts.Backoff == (backoff.Policy{}) {
		opts.Backoff = backoff.Policy{Min: 10 * time.Millisecond, Max: 200 * time.Millisecond}
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- worker.Run(ctx, opts) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-r.done:
		case <-time.After(30 * time.Second):
			t.Error("worker.Run did not return 30s after its context was cancelled")
		}
	})
	return r
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func waitCompletion(t testing.TB, f *fakeController, d time.Duration) *decreev1.CompleteAssignmentRequest {
	t.Helper()
	select {
	case c := <-f.completed:
		return c
	case <-time.After(d):
		t.Fatalf("no CompleteAssignment within %v", d)
		return nil
	}
}

func routineAssignment(token, routine string) *decreev1.Assignment {
	return &decreev1.Assignment{
		LeaseToken:  token,
		Kind:        decreev1.AssignmentKind_ASSIGNMENT_KIND_ROUTINE,
		Attempt:     1,
		MaxAttempts: 3,
		MessageId:   "2026112107000001-0",
		MessageDir:  ".decree/runs/2026112107000001-0",
		Routine: &decreev1.RoutineRef{
			Name: routine, Driver: "shell", Path: ".decree/routines/" + routine + ".sh",
			Format: decreev1.RoutineFormat_ROUTINE_FORMAT_SHELL,
		},
		Params: map[string]string{"message_id": "2026112107000001-0", "message_file": ".decree/runs/2026112107000001-0/message.md"},
	}
}

func TestRegistrationFields(t *testing.T) {
	ws := workspace(t, nil)
	fake := newFakeController()
	startServer(t, sockOf(ws), fake)
	host, _ := os.Hostname()

	run := func(id string) *decreev1.RegisterWorkerRequest {
		n := fake.registrationCount()
		w := runWorker(t, worker.Options{Workspace: ws, WorkerID: id, Labels: map[string]string{"os": "linux", "gpu": "none"}, Version: "1.2.3"})
		deadline := time.Now().Add(10 * time.Second)
		for fake.registrationCount() == n {
			if time.Now().After(deadline) {
				t.Fatal("worker did not register within 10s")
			}
			time.Sleep(5 * time.Millisecond)
		}
		w.cancel()
		<-w.done
		w.done <- nil // for the cleanup
		fake.mu.Lock()
		defer fake.mu.Unlock()
		return fake.registrations[len(fake.registrations)-1]
	}

	first := run("")
	if first.GetWorkspace() != ws {
		t.Errorf("workspace = %q, want %q", first.GetWorkspace(), ws)
	}
	if first.GetWorkspaceInstanceId() != instanceID {
		t.Errorf("workspace_instance_id = %q, want %q", first.GetWorkspaceInstanceId(), instanceID)
	}
	if first.GetHostname() != host {
		t.Errorf("hostname = %q, want %q", first.GetHostname(), host)
	}
	if first.GetVersion() != "1.2.3" {
		t.Errorf("version = %q", first.GetVersion())
	}
	if got := first.GetLabels(); len(got) != 2 || got["os"] != "linux" || got["gpu"] != "none" {
		t.Errorf("labels = %v", got)
	}
	if d := first.GetDrivers(); len(d) != 2 || d[0].GetName() != "notebook" || d[0].GetExtensions()[0] != ".ipynb" ||
		d[1].GetName() != "shell" || d[1].GetExtensions()[0] != ".sh" {
		t.Errorf("drivers = %v, want notebook (.ipynb) and shell (.sh)", d)
	}
	if !strings.HasPrefix(first.GetWorkerId(), host+"-") || len(first.GetWorkerId()) != len(host)+9 {
		t.Errorf("default worker id = %q, want %q plus 8 hex digits", first.GetWorkerId(), host+"-")
	}
	kept, err := os.ReadFile(filepath.Join(ws, ".decree", "worker-id"))
	if err != nil || strings.TrimSpace(string(kept)) != first.GetWorkerId() {
		t.Errorf(".decree/worker-id = %q (%v), want %q", kept, err, first.GetWorkerId())
	}
	if again := run(""); again.GetWorkerId() != first.GetWorkerId() {
		t.Errorf("restarted worker id = %q, want the kept %q", again.GetWorkerId(), first.GetWorkerId())
	}
	if explicit := run("builder-7"); explicit.GetWorkerId() != "builder-7" {
		t.Errorf("explicit worker id = %q, want builder-7", explicit.GetWorkerId())
	}
}

func TestRoutineOutputCompleteAndInOrder(t *testing.T) {
	testtool.Require(t, "bash")
	ws := workspace(t, map[string]string{"interleave": `
cat "$message_file"
echo "id=$message_id extra=$EXTRA"
for i in $(seq 1 3000); do echo "out $i"; echo "err $i" >&2; done
printf 'no newline at end'
`})
	fake := newFakeController()
	startServer(t, sockOf(ws), fake)
	a := routineAssignment("lease-1", "interleave")
	a.Env = map[string]string{"EXTRA": "x y"}
	a.RunFiles = []*decreev1.RunFile{{Name: "message.md", Content: []byte("---\nroutine: interleave\n---\nbody\n")}}
	fake.assign(a)
	runWorker(t, worker.Options{Workspace: ws, LogBufferBytes: 16 << 10})

	c := waitCompletion(t, fake, 30*time.Second)
	var want bytes.Buffer
	want.WriteString("---\nroutine: interleave\n---\nbody\n")
	want.WriteString("id=2026112107000001-0 extra=x y\n")
	for i := 1; i <= 3000; i++ {
		fmt.Fprintf(&want, "out %d\nerr %d\n", i, i)
	}
	want.WriteString("no newline at end")

	if c.GetStatus().GetExitCode() != 0 || c.GetStatus().GetError() != "" {
		t.Fatalf("status = %v, want exit 0", c.GetStatus())
	}
	got, chunks, _ := fake.logOf("lease-1", "routine")
	if !bytes.Equal(got, want.Bytes()) {
		t.Fatalf("routine log differs from the routine's output:\n got %d bytes, want %d; first 200 got: %q", len(got), want.Len(), got[:min(200, len(got))])
	}
	if c.GetLogSizes()["routine"] != uint64(want.Len()) {
		t.Errorf("log_sizes = %v, want routine=%d", c.GetLogSizes(), want.Len())
	}
	if len(chunks) < 2 {
		t.Fatalf("expected the log in several chunks with a 16 KiB buffer, got %d", len(chunks))
	}
	var off uint64
	for i, ch := range chunks {
		if ch.seq != uint64(i) || ch.offset != off || ch.attempt != 1 || ch.messageID != "2026112107000001-0" || ch.stream != "routine" {
			t.Fatalf("chunk %d: %+v; want seq %d at offset %d, attempt 1, stream routine", i, ch, i, off)
		}
		off += ch.size
	}
	if off != uint64(want.Len()) {
		t.Errorf("chunks cover %d bytes, want %d", off, want.Len())
	}
	msg, err := os.ReadFile(filepath.Join(ws, ".decree", "runs", "2026112107000001-0", "message.md"))
	if err != nil || !strings.Contains(string(msg), "body") {
		t.Errorf("run file not placed: %q, %v", msg, err)
	}
}

func TestRoutineOutcomes(t *testing.T) {
	testtool.Require(t, "bash")
	tests := []struct {
		name      string
		routine   string // source; "" means the file is missing
		timeout   time.Duration
		runFile   string
		driver    string
		wantCode  int32
		wantTO    bool
		wantError string
		wantLog   string
	}{
		{name: "exit code", routine: "echo failing; exit 3", wantCode: 3, wantLog: "failing\n"},
		{name: "timeout", routine: "echo begin; sleep 30; echo never", timeout: 300 * time.Millisecond, wantCode: 1, wantTO: true, wantError: "timed out after 300ms", wantLog: "begin\n"},
		{name: "missing routine", routine: "", wantCode: -1, wantError: "does not exist in workspace"},
		{name: "unsafe run file", routine: "echo x", runFile: "../evil.md", wantCode: -1, wantError: "unsafe path"},
		{name: "unknown driver", routine: "echo x", driver: "fortran", wantCode: -1, wantError: `no driver "fortran" on this worker`},
		{name: "killed by a signal", routine: "echo bye; kill -9 $$", wantCode: 137, wantError: "killed by signal 9", wantLog: "bye\n"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			routines := map[string]string{}
			if tt.routine != "" {
				routines["r"] = tt.routine
			}
			ws := workspace(t, routines)
			fake := newFakeController()
			startServer(t, sockOf(ws), fake)
			a := routineAssignment("lease-"+strconv.Itoa(i), "r")
			if tt.timeout > 0 {
				a.Timeout = durationpb.New(tt.timeout)
			}
			if tt.driver != "" {
				a.Routine.Driver = tt.driver
			}
			if tt.runFile != "" {
				a.RunFiles = []*decreev1.RunFile{{Name: tt.runFile, Content: []byte("x")}}
			}
			fake.assign(a)
			runWorker(t, worker.Options{Workspace: ws})
			c := waitCompletion(t, fake, 20*time.Second)
			st := c.GetStatus()
			if st.GetExitCode() != tt.wantCode || st.GetTimedOut() != tt.wantTO || !strings.Contains(st.GetError(), tt.wantError) {
				t.Errorf("status = %v; want exit %d, timed_out %v, error containing %q", st, tt.wantCode, tt.wantTO, tt.wantError)
			}
			if tt.wantError == "" && st.GetError() != "" {
				t.Errorf("unexpected error %q", st.GetError())
			}
			if st.GetDuration() == nil {
				t.Error("status has no duration")
			}
			got, _, _ := fake.logOf(a.GetLeaseToken(), "routine")
			if string(got) != tt.wantLog {
				t.Errorf("log = %q, want %q", got, tt.wantLog)
			}
		})
	}
}

func TestServerDropResumesLogExactlyOnce(t *testing.T) {
	testtool.Require(t, "bash")
	ws := workspace(t, map[string]string{"big": "seq 1 400000"})
	fake := newFakeController()
	srv := startServer(t, sockOf(ws), fake)
	drop := make(chan struct{})
	var once bool
	fake.onData = func(_, _ string, size uint64) bool {
		if size >= 512<<10 && !once {
			once = true
			close(drop) // and keep this upload hanging, unacknowledged
			return true
		}
		return false
	}
	fake.assign(routineAssignment("lease-drop", "big"))
	runWorker(t, worker.Options{Workspace: ws, LogBufferBytes: 256 << 10})

	select {
	case <-drop:
	case <-time.After(20 * time.Second):
		t.Fatal("the log never reached 512 KiB")
	}
	srv.restart()

	c := waitCompletion(t, fake, 60*time.Second)
	var want bytes.Buffer
	for i := 1; i <= 400000; i++ {
		want.WriteString(strconv.Itoa(i))
		want.WriteByte('\n')
	}
	got, chunks, skipped := fake.logOf("lease-drop", "routine")
	if !bytes.Equal(got, want.Bytes()) {
		t.Fatalf("log after the drop: %d bytes, want %d (exactly once, in order)", len(got), want.Len())
	}
	if c.GetLogSizes()["routine"] != uint64(want.Len()) || c.GetStatus().GetExitCode() != 0 {
		t.Errorf("completion = %v, want exit 0 and log size %d", c, want.Len())
	}
	if n := fake.registrationCount(); n < 2 {
		t.Errorf("worker registered %d times; want a new registration after the drop", n)
	}
	// Resent chunks repeat the originals exactly, so the chunks that brought
	// new bytes have consecutive sequence numbers and start where the stored
	// log ended.
	for i, ch := range chunks {
		if ch.seq != uint64(i) || ch.offset != ch.stored {
			t.Fatalf("chunk %d %+v: want sequence %d starting at the stored size", i, ch, i)
		}
	}
	if skipped == 0 {
		t.Errorf("no bytes were resent after the drop; the interrupted upload was not resumed from the acknowledged offset")
	}
	t.Logf("log of %d bytes in %d accepted chunks; %d bytes resent and skipped", len(got), len(chunks), skipped)
}

// alive reports whether pid exists and is not a zombie.
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}

func TestStopLeasesStopsProcessGroup(t *testing.T) {
	testtool.Require(t, "bash")
	testtool.Require(t, "sleep")
	ws := workspace(t, map[string]string{"sleeper": `
sleep 300 &
echo $! > child.pid
echo started
wait
echo never
`})
	fake := newFakeController()
	startServer(t, sockOf(ws), fake)
	fake.onData = func(token, _ string, _ uint64) bool {
		fake.mu.Lock()
		fake.stop[token] = true
		fake.mu.Unlock()
		return false
	}
	fake.assign(routineAssignment("lease-stop", "sleeper"))
	runWorker(t, worker.Options{Workspace: ws, Executor: worker.NewDefaultExecutor(worker.ExecOptions{Grace: 5 * time.Second})})

	c := waitCompletion(t, fake, 30*time.Second)
	st := c.GetStatus()
	if st.GetSignal() != 15 || st.GetExitCode() != 128+15 || !strings.Contains(st.GetError(), "stopped") {
		t.Errorf("status = %v; want ended by SIGTERM (exit 143) with a 'stopped' error", st)
	}
	got, _, _ := fake.logOf("lease-stop", "routine")
	if string(got) != "started\n" {
		t.Errorf("log = %q, want %q", got, "started\n")
	}
	b, err := os.ReadFile(filepath.Join(ws, "child.pid"))
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for alive(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("background sleep %d of the stopped routine is still running", pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestRouter(t *testing.T) {
	testtool.Require(t, "bash")
	tests := []struct {
		name     string
		command  string
		stdin    string
		limit    int
		wantOut  string
		wantLog  string
		wantCode int32
		wantErr  string
	}{
		{name: "answer on stdout", command: "tr a-z A-Z; echo to-the-log >&2", stdin: "pick develop\n", wantOut: "PICK DEVELOP\n", wantLog: "to-the-log\n"},
		{name: "failing router", command: "echo partial; echo broken >&2; exit 4", wantOut: "partial\n", wantLog: "broken\n", wantCode: 4},
		{name: "answer too long", command: "head -c 5000 /dev/zero | tr '\\0' a", limit: 1000, wantOut: strings.Repeat("a", 1000), wantCode: 1, wantErr: "longer than 1000 bytes"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ws := workspace(t, nil)
			fake := newFakeController()
			startServer(t, sockOf(ws), fake)
			tok := "router-" + strconv.Itoa(i)
			fake.assign(&decreev1.Assignment{
				LeaseToken: tok, Kind: decreev1.AssignmentKind_ASSIGNMENT_KIND_ROUTER,
				Attempt: 1, MessageId: "m-1", Command: tt.command, Stdin: []byte(tt.stdin),
			})
			runWorker(t, worker.Options{Workspace: ws, Executor: worker.NewDefaultExecutor(worker.ExecOptions{RouterOutputLimit: tt.limit})})
			c := waitCompletion(t, fake, 20*time.Second)
			if string(c.GetOutput()) != tt.wantOut {
				t.Errorf("output = %q, want %q", c.GetOutput(), tt.wantOut)
			}
			if c.GetStatus().GetExitCode() != tt.wantCode || !strings.Contains(c.GetStatus().GetError(), tt.wantErr) {
				t.Errorf("status = %v, want exit %d and error containing %q", c.GetStatus(), tt.wantCode, tt.wantErr)
			}
			got, _, _ := fake.logOf(tok, "router")
			if string(got) != tt.wantLog {
				t.Errorf("router log = %q, want %q", got, tt.wantLog)
			}
		})
	}
}

// TestReplicaSyncFailureReturnsNothing: a worker whose workspace is a
// replica keeps serving (it no longer refuses), and when the replica cannot
// be brought up to date (this fake controller has no replica service) the
// routine does not run and the report says so without a workspace, so the
// controller leaves its tree alone.
func TestReplicaSyncFailureReturnsNothing(t *testing.T) {
	testtool.Require(t, "bash")
	ws := workspace(t, map[string]string{"touch": "#!/bin/bash\necho ran > ran.txt\n"})
	fake := newFakeController()
	fake.inPlace = false
	startServer(t, sockOf(ws), fake)
	a := routineAssignment("tok-replica", "touch")
	a.ManifestDigest = strings.Repeat("ab", 32)
	a.Routine.Content = []byte("#!/bin/bash\necho ran > ran.txt\n")
	fake.assign(a)
	runWorker(t, worker.Options{Workspace: ws})
	c := waitCompletion(t, fake, 20*time.Second)
	if c.GetStatus().GetExitCode() != -1 || !strings.Contains(c.GetStatus().GetError(), "up to date") {
		t.Errorf("status = %v, want exit -1 and an error about bringing the replica up to date", c.GetStatus())
	}
	if c.GetWorkspaceReturned() || len(c.GetWorkspaceManifest()) != 0 {
		t.Errorf("workspace returned = %v with %d entries, want nothing", c.GetWorkspaceReturned(), len(c.GetWorkspaceManifest()))
	}
	if _, err := os.Stat(filepath.Join(ws, "ran.txt")); err == nil {
		t.Error("the routine ran although the replica was not synced")
	}
}

func TestShutdownStopsRoutineAndReports(t *testing.T) {
	testtool.Require(t, "bash")
	ws := workspace(t, map[string]string{"long": "echo working; sleep 300"})
	fake := newFakeController()
	startServer(t, sockOf(ws), fake)
	started := make(chan struct{})
	var once bool
	fake.onData = func(string, string, uint64) bool {
		if !once {
			once = true
			close(started)
		}
		return false
	}
	fake.assign(routineAssignment("lease-shutdown", "long"))
	w := runWorker(t, worker.Options{Workspace: ws})
	<-started
	w.cancel()
	select {
	case err := <-w.done:
		w.done <- err
		if err != nil {
			t.Fatalf("Run after cancel = %v, want nil", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Run did not return after its context was cancelled")
	}
	select {
	case c := <-fake.completed:
		if !strings.Contains(c.GetStatus().GetError(), "stopped") || c.GetStatus().GetSignal() != 15 {
			t.Errorf("status = %v, want stopped by SIGTERM", c.GetStatus())
		}
	default:
		t.Fatal("Run returned without reporting the stopped routine")
	}
}

func TestParseLabels(t *testing.T) {
	tests := []struct {
		in      []string
		want    map[string]string
		wantErr string
	}{
		{in: []string{"os=linux", "gpu=", "zone=a=b"}, want: map[string]string{"os": "linux", "gpu": "", "zone": "a=b"}},
		{in: []string{"novalue"}, wantErr: "has no '='"},
		{in: []string{"=x"}, wantErr: "empty key"},
		{in: []string{"a b=x"}, wantErr: "contains a space"},
		{in: []string{"os=a", "os=b"}, wantErr: "given twice"},
	}
	for _, tt := range tests {
		got, err := worker.ParseLabels(tt.in)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("ParseLabels(%q) error = %v, want %q", tt.in, err, tt.wantErr)
			}
			continue
		}
		if err != nil || len(got) != len(tt.want) {
			t.Errorf("ParseLabels(%q) = %v, %v", tt.in, got, err)
			continue
		}
		for k, v := range tt.want {
			if got[k] != v {
				t.Errorf("ParseLabels(%q)[%q] = %q, want %q", tt.in, k, got[k], v)
			}
		}
	}
}

func TestDefaultControllerAddress(t *testing.T) {
	if got := worker.DefaultControllerAddress("/srv/proj"); got != "unix:///srv/proj/.decree/decree.sock" {
		t.Errorf("DefaultControllerAddress = %q", got)
	}
}

func TestHookLogsToHookStreamWithEnv(t *testing.T) {
	testtool.Require(t, "bash")
	ws := workspace(t, map[string]string{"notify": `echo "hook=$DECREE_HOOK message=$message_id"`})
	fake := newFakeController()
	startServer(t, sockOf(ws), fake)
	a := routineAssignment("lease-hook", "notify")
	a.Kind = decreev1.AssignmentKind_ASSIGNMENT_KIND_HOOK
	a.Env = map[string]string{"DECREE_HOOK": "afterEach"}
	fake.assign(a)
	runWorker(t, worker.Options{Workspace: ws})
	c := waitCompletion(t, fake, 20*time.Second)
	want := "hook=afterEach message=2026112107000001-0\n"
	if got, _, _ := fake.logOf("lease-hook", "hook-aftereach"); string(got) != want {
		t.Errorf("hook log = %q, want %q", got, want)
	}
	if c.GetLogSizes()["hook-aftereach"] != uint64(len(want)) || c.GetStatus().GetExitCode() != 0 {
		t.Errorf("completion = %v", c)
	}
}

// A hook outside any message (beforeAll) runs without uploading a log: the
// controller has no run directory for it, and refusing the log must not
// cancel the hook.
func TestHookWithoutMessageRunsWithoutLog(t *testing.T) {
	testtool.Require(t, "bash")
	ws := workspace(t, map[string]string{"batch": `echo started > batch-ran; echo noise`})
	fake := newFakeController()
	startServer(t, sockOf(ws), fake)
	a := routineAssignment("lease-batch", "batch")
	a.Kind = decreev1.AssignmentKind_ASSIGNMENT_KIND_HOOK
	a.MessageId, a.MessageDir, a.RunFiles = "", "", nil
	a.Env = map[string]string{"DECREE_HOOK": "beforeAll"}
	fake.assign(a)
	runWorker(t, worker.Options{Workspace: ws})
	c := waitCompletion(t, fake, 20*time.Second)
	if c.GetStatus().GetExitCode() != 0 || c.GetStatus().GetError() != "" {
		t.Fatalf("completion = %v", c)
	}
	if _, err := os.Stat(filepath.Join(ws, "batch-ran")); err != nil {
		t.Fatalf("the hook did not run: %v", err)
	}
	if got, _, _ := fake.logOf("lease-batch", "hook-beforeall"); len(got) != 0 {
		t.Errorf("a log was uploaded without a message: %q", got)
	}
}

// Work whose lease the controller never renews is not started at all: the
// controller may have given it to another worker meanwhile.
func TestUnconfirmedLeaseIsNotRun(t *testing.T) {
	testtool.Require(t, "bash")
	ws := workspace(t, map[string]string{"long": "echo ran > ran.txt"})
	fake := newFakeController()
	fake.leaseTTL = 500 * time.Millisecond
	fake.failHeartbeats = true
	startServer(t, sockOf(ws), fake)
	fake.assign(routineAssignment("lease-unconfirmed", "long"))
	runWorker(t, worker.Options{Workspace: ws})
	c := waitCompletion(t, fake, 20*time.Second)
	if st := c.GetStatus(); st.GetExitCode() != -1 || !strings.Contains(st.GetError(), "did not renew the lease") {
		t.Errorf("status = %v, want the work refused for want of a renewed lease", st)
	}
	if _, err := os.Stat(filepath.Join(ws, "ran.txt")); err == nil {
		t.Error("the routine ran under a lease the controller never renewed")
	}
}

// Once heartbeats stop getting through, the attempt's whole process tree
// (a setsid child included) is gone by the end of the lease.
func TestLeaseNotRenewedStopsWork(t *testing.T) {
	testtool.Require(t, "bash")
	testtool.Require(t, "setsid")
	ws := workspace(t, map[string]string{"long": "setsid bash -c 'echo $$ > gc.pid; sleep 300' &\necho working; sleep 300"})
	fake := newFakeController()
	fake.leaseTTL = 500 * time.Millisecond
	startServer(t, sockOf(ws), fake)
	fake.assign(routineAssignment("lease-fence", "long"))
	runWorker(t, worker.Options{Workspace: ws, Executor: worker.NewDefaultExecutor(worker.ExecOptions{Grace: 5 * time.Second})})
	gcFile := filepath.Join(ws, "gc.pid")
	testtool.WaitFor(t, 20*time.Second, "the routine's detached child", func() bool {
		b, err := os.ReadFile(gcFile)
		return err == nil && len(b) > 0 && b[len(b)-1] == '\n'
	})
	b, _ := os.ReadFile(gcFile)
	gc, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	t.Cleanup(func() { _ = syscall.Kill(gc, syscall.SIGKILL) })
	fake.mu.Lock()
	fake.failHeartbeats = true
	fake.mu.Unlock()
	cut := time.Now()
	c := waitCompletion(t, fake, 20*time.Second)
	st := c.GetStatus()
	if !strings.Contains(st.GetError(), "lease expired") || st.GetSignal() == 0 {
		t.Errorf("status = %v, want the routine killed because its lease expired", st)
	}
	if took := time.Since(cut); took > 3*time.Second {
		t.Errorf("stopped %s after the last heartbeat; the lease TTL is 500ms", took)
	}
	if err := syscall.Kill(gc, 0); err == nil {
		t.Errorf("the detached child %d outlived the lease", gc)
	}
}

func TestLeaseLostDuringUploadStopsRoutine(t *testing.T) {
	testtool.Require(t, "bash")
	ws := workspace(t, map[string]string{"chatty": `
echo $$ > main.pid
while true; do echo tick; sleep 0.01; done
`})
	fake := newFakeController()
	startServer(t, sockOf(ws), fake)
	fake.onData = func(token, _ string, _ uint64) bool {
		fake.mu.Lock()
		delete(fake.leases, token) // the controller forgets the lease
		fake.mu.Unlock()
		return false
	}
	fake.assign(routineAssignment("lease-lost", "chatty"))
	runWorker(t, worker.Options{Workspace: ws, Executor: worker.NewDefaultExecutor(worker.ExecOptions{Grace: 5 * time.Second})})

	deadline := time.Now().Add(20 * time.Second)
	for {
		fake.mu.Lock()
		n := len(fake.refused)
		var st *decreev1.ExitStatus
		if n > 0 {
			st = fake.refused[0].GetStatus()
		}
		fake.mu.Unlock()
		if n > 0 {
			if !strings.Contains(st.GetError(), "refused the log") {
				t.Errorf("status = %v, want it stopped because the log was refused", st)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the worker never reported the routine whose lease was lost")
		}
		time.Sleep(5 * time.Millisecond)
	}
	b, err := os.ReadFile(filepath.Join(ws, "main.pid"))
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	if alive(pid) {
		t.Errorf("routine %d still runs after its lease was lost", pid)
	}
}
