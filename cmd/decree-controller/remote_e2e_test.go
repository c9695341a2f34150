package main

// End-to-end tests of a controller reached over TCP: the three real
// binaries, built once, run as separate processes; TLS material comes from
// pkg/auth/authtest (crypto/x509), tokens from files.

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protojson"

	"github.com/decreehq/decree/internal/testtool"
	"github.com/decreehq/decree/pkg/auth/authtest"
	decreev1 "github.com/decreehq/decree/proto/decree/v1"
)

const (
	clientToken = "e2e-client-token-00112233445566778899"
	workerToken = "e2e-worker-token-00112233445566778899"
)

func TestMain(m *testing.M) {
	code := m.Run()
	testtool.Cleanup()
	os.Exit(code)
}

// env is one test's world: binaries, a project, TLS files and tokens.
type env struct {
	t        *testing.T
	bin      string
	dir      string
	project  string
	ca       *authtest.CA
	caFile   string
	cert     string
	key      string
	clientTF string
	workerTF string
}

func newEnv(t *testing.T) *env {
	t.Helper()
	testtool.Require(t, "bash")
	e := &env{t: t, bin: testtool.Binaries(t), dir: t.TempDir()}
	e.ca = authtest.NewCA(t, "e2e CA")
	e.caFile = authtest.WriteFile(t, e.dir, "ca.crt", e.ca.CertPEM)
	e.cert, e.key = e.ca.Server(t).Write(t, e.dir, "controller")
	e.clientTF = authtest.WriteFile(t, e.dir, "client.token", []byte(clientToken+"\n"))
	e.workerTF = authtest.WriteFile(t, e.dir, "worker.token", []byte(workerToken+"\n"))
	e.project = e.newProject("proj")
	return e
}

// newProject makes a project with two routines: stamp writes a file naming
// its message; hold waits until the file "release" exists.
func (e *env) newProject(name string) string {
	t := e.t
	t.Helper()
	p := filepath.Join(e.dir, name)
	if err := os.MkdirAll(p, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(filepath.Join(e.bin, "decreectl"), "-C", p, "init").CombinedOutput(); err != nil {
		t.Fatalf("decreectl init: %v\n%s", err, out)
	}
	routines := map[string]string{
		"stamp.sh": "#!/usr/bin/env bash\n# Stamp the tree\nset -euo pipefail\nmessage_id=\"${message_id:-}\"\nprintf 'stamped by %s\\n' \"$message_id\" > remote-result.txt\necho stamp done\n",
		"hold.sh":  "#!/usr/bin/env bash\n# Hold until released\nset -euo pipefail\nmessage_id=\"${message_id:-}\"\nfor _ in $(seq 600); do [ -f release ] && break; sleep 0.1; done\n[ -f release ]\nrm -f release\necho held > held.txt\n",
	}
	for name, body := range routines {
		if err := os.WriteFile(filepath.Join(p, ".decree", "routines", name), []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	cfg := filepath.Join(p, ".decree", "config.yml")
	f, err := os.OpenFile(cfg, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprint(f, "  stamp:\n    enabled: true\n  hold:\n    enabled: true\n")
	f.Close()
	return p
}

// start runs a binary in the background; it is stopped at cleanup. stdout,
// when not nil, receives its standard output.
func (e *env) start(name string, stdout io.Writer, args ...string) *testtool.Proc {
	e.t.Helper()
	cmd := exec.Command(filepath.Join(e.bin, name), args...)
	cmd.Env = cleanEnv()
	cmd.Stdout = stdout
	return testtool.Start(e.t, name, cmd)
}

// cleanEnv is the test's environment without DECREE_* variables, so a
// developer's own settings do not leak into the processes.
func cleanEnv() []string {
	var out []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "DECREE_") {
			out = append(out, kv)
		}
	}
	return out
}

// startController starts decree-controller with args after --project and
// returns the TCP address it prints.
func (e *env) startController(project string, args ...string) (string, *testtool.Proc) {
	e.t.Helper()
	cmd := exec.Command(filepath.Join(e.bin, "decree-controller"), append([]string{"--project", project}, args...)...)
	cmd.Env = cleanEnv()
	return testtool.StartListening(e.t, cmd)
}

// ctl runs decreectl to completion and returns its exit code and output.
func (e *env) ctl(ctx context.Context, extraEnv []string, args ...string) (int, string, string) {
	e.t.Helper()
	cmd := exec.CommandContext(ctx, filepath.Join(e.bin, "decreectl"), args...)
	cmd.Env = append(cleanEnv(), extraEnv...)
	cmd.Dir = e.dir // not a project: everything must go through --controller
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		e.t.Fatalf("decreectl %v: %v", args, err)
	}
	return code, stdout.String(), stderr.String()
}

func timeout(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func (e *env) tlsController() string {
	addr, _ := e.startController(e.project, "--listen", "127.0.0.1:0",
		"--tls-cert", e.cert, "--tls-key", e.key,
		"--client-token-file", e.clientTF, "--worker-token-file", e.workerTF, "--lease-ttl", "3s")
	return addr
}

func TestRemoteWorkerOverTLS(t *testing.T) {
	e := newEnv(t)
	addr := e.tlsController()
	e.start("decree-worker", nil, "--controller", addr, "--tls-ca", e.caFile, "--token-file", e.workerTF,
		"--workspace", e.project, "--id", "remote-1", "--label", "zone=e2e")
	remote := []string{"--controller", addr, "--tls-ca", e.caFile, "--token-file", e.clientTF}
	ctx := timeout(t, 2*time.Minute)

	code, out, errOut := e.ctl(ctx, nil, append(remote, "run", "-p", "stamp the tree", "-v", "routine=stamp")...)
	if code != 0 {
		t.Fatalf("decreectl run: exit %d\n%s\n%s", code, out, errOut)
	}
	got, err := os.ReadFile(filepath.Join(e.project, "remote-result.txt"))
	if err != nil {
		t.Fatalf("the routine's file is not in the controller's tree: %v", err)
	}
	if !strings.HasPrefix(string(got), "stamped by ") || !strings.Contains(out+errOut, strings.TrimSpace(strings.TrimPrefix(string(got), "stamped by "))) {
		t.Errorf("remote-result.txt = %q; want it to name the message decreectl reported:\n%s%s", got, out, errOut)
	}

	// decreectl workers: drivers, labels, current work, last heartbeat.
	// A held routine shows as the worker's current work.
	runDone := make(chan int, 1)
	go func() {
		code, _, _ := e.ctl(ctx, nil, append(remote, "run", "-q", "-p", "hold on", "-v", "routine=hold")...)
		runDone <- code
	}()
	var w *decreev1.WorkerInfo
	deadline := time.Now().Add(60 * time.Second)
	for w.GetCurrentMessageId() == "" {
		if time.Now().After(deadline) {
			t.Fatalf("decreectl workers never showed the held message as current work; last: %v", w)
		}
		time.Sleep(100 * time.Millisecond)
		code, out, errOut := e.ctl(ctx, nil, append(remote, "workers", "-o", "json")...)
		if code != 0 {
			t.Fatalf("decreectl workers: exit %d: %s", code, errOut)
		}
		var resp decreev1.ListWorkersResponse
		if err := protojson.Unmarshal([]byte(out), &resp); err != nil {
			t.Fatalf("decreectl workers -o json: %v\n%s", err, out)
		}
		if len(resp.GetWorkers()) != 1 {
			t.Fatalf("workers: %v, want the one remote worker", resp.GetWorkers())
		}
		w = resp.GetWorkers()[0]
	}
	if w.GetId() != "remote-1" || w.GetLabels()["zone"] != "e2e" || !w.GetConnected() ||
		!strings.Contains(strings.Join(w.GetDrivers(), ","), "shell") || w.GetLastHeartbeat() == nil ||
		time.Since(w.GetLastHeartbeat().AsTime()) > time.Minute {
		t.Errorf("worker listed as %v; want id remote-1, label zone=e2e, connected, the shell driver and a recent heartbeat", w)
	}
	code, table, _ := e.ctl(ctx, nil, append(remote, "workers")...)
	for _, want := range []string{"remote-1", "zone=e2e", "shell", w.GetCurrentMessageId(), "LAST HEARTBEAT"} {
		if code != 0 || !strings.Contains(table, want) {
			t.Errorf("decreectl workers table lacks %q:\n%s", want, table)
		}
	}
	if err := os.WriteFile(filepath.Join(e.project, "release"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if code := <-runDone; code != 0 {
		t.Fatalf("the held run ended with exit %d", code)
	}
	if _, err := os.Stat(filepath.Join(e.project, "held.txt")); err != nil {
		t.Errorf("the held routine's result is missing: %v", err)
	}
}

func TestRemoteRefusals(t *testing.T) {
	e := newEnv(t)
	addr := e.tlsController()
	ctx := timeout(t, 2*time.Minute)
	wrong := authtest.WriteFile(t, e.dir, "wrong.token", []byte("not-the-right-token-at-all\n"))
	open := authtest.WriteFile(t, e.dir, "open.token", []byte(clientToken))
	if err := os.Chmod(open, 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		env  []string
		args []string
		want string
	}{
		{"no token", nil, []string{"--tls-ca", e.caFile}, "needs a token"},
		{"wrong token", nil, []string{"--tls-ca", e.caFile, "--token-file", wrong}, "not accepted"},
		{"wrong token from DECREE_TOKEN", []string{"DECREE_TOKEN=not-the-right-token-at-all"}, []string{"--tls-ca", e.caFile}, "not accepted"},
		{"worker token", nil, []string{"--tls-ca", e.caFile, "--token-file", e.workerTF}, "this is a worker token"},
		{"world-readable token file", nil, []string{"--tls-ca", e.caFile, "--token-file", open}, "chmod 600"},
		{"unknown CA", nil, []string{"--token-file", e.clientTF}, "certificate"},
		{"insecure to a TLS controller", nil, []string{"--insecure", "--token-file", e.clientTF}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := e.ctl(ctx, tc.env, append(append([]string{"--controller", addr}, tc.args...), "status")...)
			if code == 0 || !strings.Contains(errOut, tc.want) {
				t.Errorf("decreectl status: exit %d, stderr %q; want a failure mentioning %q\n%s", code, errOut, tc.want, out)
			}
		})
	}
	// The client token from the environment works.
	if code, out, errOut := e.ctl(ctx, []string{"DECREE_TOKEN=" + clientToken, "DECREE_CONTROLLER=" + addr}, "--tls-ca", e.caFile, "status"); code != 0 {
		t.Errorf("DECREE_TOKEN and DECREE_CONTROLLER: exit %d\n%s%s", code, out, errOut)
	}

	// A worker with the client token is refused for good and exits.
	w := e.start("decree-worker", nil, "--controller", addr, "--tls-ca", e.caFile, "--token-file", e.clientTF,
		"--workspace", e.project, "--id", "impostor")
	select {
	case <-w.Done():
		if w.Err() == nil || !strings.Contains(w.Out.String(), "this is a client token") {
			t.Errorf("worker with the client token: %v, output %q; want an error exit naming the client token", w.Err(), w.Out)
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("a worker with the client token is still running:\n%s", w.Out)
	}
}

func TestControllerRefusesUnsafeListeners(t *testing.T) {
	e := newEnv(t)
	open := authtest.WriteFile(t, e.dir, "open.token", []byte(workerToken))
	if err := os.Chmod(open, 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"non-loopback without TLS", []string{"--listen", "0.0.0.0:0", "--client-token-file", e.clientTF}, "non-loopback address without TLS"},
		{"non-loopback with --insecure", []string{"--listen", "0.0.0.0:0", "--insecure", "--client-token-file", e.clientTF}, "loopback address"},
		{"no tokens", []string{"--listen", "127.0.0.1:0", "--insecure"}, "needs tokens"},
		{"world-readable token file", []string{"--listen", "127.0.0.1:0", "--insecure", "--worker-token-file", open}, "chmod 600"},
		{"lease TTL of zero", []string{"--lease-ttl", "0s"}, "--lease-ttl"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command(filepath.Join(e.bin, "decree-controller"), append([]string{"--project", e.project}, tc.args...)...)
			cmd.Env = cleanEnv()
			out, err := cmd.CombinedOutput()
			if err == nil || !strings.Contains(string(out), tc.want) {
				t.Errorf("decree-controller %v: %v\n%s\nwant a refusal mentioning %q", tc.args, err, out, tc.want)
			}
		})
	}
}

func TestInsecureLoopbackAndMutualTLS(t *testing.T) {
	e := newEnv(t)
	ctx := timeout(t, 2*time.Minute)
	addr, _ := e.startController(e.project, "--listen", "127.0.0.1:0", "--insecure",
		"--client-token-file", e.clientTF, "--worker-token-file", e.workerTF)
	if code, out, errOut := e.ctl(ctx, nil, "--controller", addr, "--insecure", "--token-file", e.clientTF, "status"); code != 0 || !strings.Contains(out, e.project) {
		t.Errorf("--insecure on loopback: exit %d\n%s%s", code, out, errOut)
	}
	if code, _, errOut := e.ctl(ctx, nil, "--controller", addr, "--insecure", "status"); code == 0 || !strings.Contains(errOut, "needs a token") {
		t.Errorf("--insecure without a token: exit %d, %s; want refused", code, errOut)
	}

	// Mutual TLS, on a second project (one controller per project).
	mproj := e.newProject("mtls")
	maddr, _ := e.startController(mproj, "--listen", "127.0.0.1:0", "--tls-cert", e.cert, "--tls-key", e.key,
		"--tls-client-ca", e.caFile, "--client-token-file", e.clientTF)
	cc, ck := e.ca.Client(t, "decreectl").Write(t, e.dir, "client")
	base := []string{"--controller", maddr, "--tls-ca", e.caFile, "--token-file", e.clientTF}
	if code, out, errOut := e.ctl(ctx, nil, append(base, "--tls-cert", cc, "--tls-key", ck, "status")...); code != 0 || !strings.Contains(out, mproj) {
		t.Errorf("mutual TLS with a client certificate: exit %d\n%s%s", code, out, errOut)
	}
	if code, _, errOut := e.ctl(ctx, nil, append(base, "status")...); code == 0 {
		t.Errorf("mutual TLS without a client certificate: exit 0; want refused (%s)", errOut)
	}
}
