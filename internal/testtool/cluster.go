package testtool

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	pauth "github.com/decreehq/decree/pkg/auth"
	decreev1 "github.com/decreehq/decree/proto/decree/v1"
)

// Cluster is a real decree-controller serving a project over TCP on
// loopback (--insecure, with client and worker tokens) and a real
// decree-worker connected to it over TCP with the worker token: the set-up
// a client in another language talks to.
type Cluster struct {
	t testing.TB
	// Bin holds the built commands.
	Bin string
	// Project is the project directory.
	Project string
	// Addr is the controller's TCP address (127.0.0.1:PORT).
	Addr string
	// ClientToken is the client token; ClientTokenFile holds it (0600).
	ClientToken, ClientTokenFile string
	// WorkerTokenFile holds the worker token.
	WorkerTokenFile string
	// Controller and Worker are the processes.
	Controller, Worker *Proc
}

// InitProject makes a decree project in a new temporary directory with
// `decreectl init` and returns its path (symlinks resolved).
func InitProject(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	if d, err := filepath.EvalSymlinks(dir); err == nil {
		dir = d
	}
	project := filepath.Join(dir, "project")
	if err := os.MkdirAll(project, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(filepath.Join(Binaries(t), "decreectl"), "-C", project, "init").CombinedOutput(); err != nil {
		t.Fatalf("decreectl init: %v\n%s", err, out)
	}
	return project
}

// StartCluster starts a controller for project (extra arguments appended)
// and a worker, and waits until the worker is connected.
func StartCluster(t testing.TB, project string, controllerArgs ...string) *Cluster {
	t.Helper()
	c := &Cluster{t: t, Bin: Binaries(t), Project: project}
	dir := t.TempDir()
	c.ClientToken = "client-" + filepath.Base(dir) + "-0123456789abcdef"
	c.ClientTokenFile = filepath.Join(dir, "client.token")
	c.WorkerTokenFile = filepath.Join(dir, "worker.token")
	for f, tok := range map[string]string{c.ClientTokenFile: c.ClientToken, c.WorkerTokenFile: "worker-" + filepath.Base(dir) + "-0123456789abcdef"} {
		if err := os.WriteFile(f, []byte(tok+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	c.StartController(controllerArgs...)
	c.Worker = Start(t, "decree-worker", c.command("decree-worker", "--controller", c.Addr, "--insecure",
		"--token-file", c.WorkerTokenFile, "--workspace", project, "--id", "w1"))
	client := decreev1.NewControllerServiceClient(c.Dial())
	WaitFor(t, 30*time.Second, "the worker to connect", func() bool {
		resp, err := client.ListWorkers(context.Background(), &decreev1.ListWorkersRequest{})
		return err == nil && len(resp.GetWorkers()) == 1 && resp.GetWorkers()[0].GetConnected()
	})
	return c
}

// StartController starts (or restarts, after StopController) the
// controller and sets Addr. A restart listens on the same address.
func (c *Cluster) StartController(extra ...string) {
	c.t.Helper()
	listen := c.Addr
	if listen == "" {
		listen = "127.0.0.1:0"
	}
	cmd := c.command("decree-controller", append([]string{"--project", c.Project, "--listen", listen, "--insecure",
		"--client-token-file", c.ClientTokenFile, "--worker-token-file", c.WorkerTokenFile, "--lease-ttl", "3s"}, extra...)...)
	c.Addr, c.Controller = StartListening(c.t, cmd)
}

// StopController stops the controller gracefully and waits for it.
func (c *Cluster) StopController() {
	c.t.Helper()
	c.Controller.Signal(syscall.SIGTERM)
	c.Controller.Wait(c.t, 30*time.Second)
}

func (c *Cluster) command(name string, args ...string) *exec.Cmd {
	cmd := exec.Command(filepath.Join(c.Bin, name), args...)
	cmd.Env = CleanEnv()
	return cmd
}

// Dial connects to the controller with the client token.
func (c *Cluster) Dial() *grpc.ClientConn {
	c.t.Helper()
	conn, err := grpc.NewClient(c.Addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithPerRPCCredentials(bearer(c.ClientToken)))
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(func() { conn.Close() })
	return conn
}

// DialNoToken connects without a token.
func (c *Cluster) DialNoToken() *grpc.ClientConn {
	c.t.Helper()
	conn, err := grpc.NewClient(c.Addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(func() { conn.Close() })
	return conn
}

// bearer sends the token on every call, also without TLS.
type bearer string

func (b bearer) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{pauth.MetadataKey: pauth.BearerPrefix + string(b)}, nil
}

func (bearer) RequireTransportSecurity() bool { return false }

// Ctl runs decreectl against the controller over TCP and returns its
// standard output, standard error and exit code.
func (c *Cluster) Ctl(ctx context.Context, args ...string) (string, string, int) {
	c.t.Helper()
	full := append([]string{"--controller", c.Addr, "--insecure", "--token-file", c.ClientTokenFile}, args...)
	cmd := exec.CommandContext(ctx, filepath.Join(c.Bin, "decreectl"), full...)
	cmd.Env = CleanEnv()
	cmd.Dir = filepath.Dir(c.Project)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		return out.String(), errb.String(), ee.ExitCode()
	case err != nil:
		c.t.Fatalf("decreectl %v: %v", args, err)
	}
	return out.String(), errb.String(), 0
}

// CleanEnv is the environment without DECREE_* variables, so a
// developer's own settings do not leak into the processes.
func CleanEnv() []string {
	var out []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "DECREE_") {
			out = append(out, kv)
		}
	}
	return out
}
