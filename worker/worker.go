// Package worker is decree's routine worker: it dials the controller's
// WorkerService, registers, receives assignments on a stream, renews their
// leases by heartbeat, runs them in its workspace through an Executor,
// streams their output back with flow control, and reports how they ended.
//
// The worker never imports the controller; the two meet only through
// proto/decree/v1.
//
// Sessions and connections. One gRPC client connection is kept for the
// worker's life; a session (RegisterWorker, StreamAssignments, heartbeats)
// runs on it. When the session breaks (the stream or a heartbeat fails), the
// worker registers again after an exponential backoff with full jitter. Work
// in progress is not interrupted by a broken session: the routine keeps
// running, its log waits in a bounded buffer (the routine blocks when it is
// full), and uploads and the completion report are retried until the
// controller answers or says the lease is gone. The controller stops work by
// naming its lease in a heartbeat answer; the routine's process group is
// then stopped with a grace period.
//
// Execution. Everything the worker runs goes through pkg/driver, so there
// is one way a worker starts and stops a process (pkg/driver/proc). The
// default executor (NewDefaultExecutor) runs routines and hooks with the
// driver their RoutineRef names: shell and notebook are built in; any
// other name is a driver plugin (decree-driver-NAME beside the worker
// binary, on PATH or in .decree/drivers/, found and launched by
// plugin.Pool). Router calls run as `bash -c COMMAND` through
// pkg/driver/proc too, with the assignment's stdin; their stdout is the
// answer (at most 1 MiB) and their stderr the log.
//
// Fencing. Work starts only once the controller has renewed its lease, and
// every process of it runs under a per-attempt supervisor (pkg/supervisor)
// that kills the whole tree when the worker dies or when the lease's
// deadline (last renewing heartbeat's send time plus the TTL) passes; see
// fence.go. Executors other than the default one get the deadline from
// their context only through the default executor's drivers, so they are
// not fenced.
//
// Identity. Without Options.WorkerID the worker uses "<hostname>-<8 hex>",
// created once and kept in <workspace>/.decree/worker-id so a restarted
// worker resumes its identity. Two workers sharing one workspace must
// therefore be given distinct ids explicitly.
//
// Workspaces. A worker whose workspace is the controller's own project
// tree (proven by <workspace>/.decree/instance-id) works in place. Any
// other workspace is kept as a replica (package worker/replica): before
// each routine or hook it is brought to the controller's manifest, and
// afterwards its manifest, new contents and returned files (follow-ups,
// run-directory artifacts) go back with the result.
package worker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials/insecure"

	pauth "github.com/decreehq/decree/pkg/auth"
	"github.com/decreehq/decree/pkg/driver/plugin"
	"github.com/decreehq/decree/pkg/layout"
	decreev1 "github.com/decreehq/decree/proto/decree/v1"
	wbackoff "github.com/decreehq/decree/worker/backoff"
	"github.com/decreehq/decree/worker/logship"
	"github.com/decreehq/decree/worker/replica"
)

// Version is reported to the controller when Options.Version is empty.
const Version = "dev"

// Defaults for Options.
const (
	DefaultLogBufferBytes   = 4 << 20
	DefaultShutdownTimeout  = 15 * time.Second
	DefaultHeartbeatPeriod  = 5 * time.Second
	defaultCallTimeout      = 30 * time.Second
	recentlyFinishedTracked = 64
)

// Executor runs one assignment. Implementations stop the work (its whole
// process group, with a grace period) when ctx ends.
type Executor interface {
	// Execute runs a in the workspace directory, writing the combined
	// output (stdout and stderr, exact bytes, in order) to out, and returns
	// how it ended. Writes to out may block: that is the log's flow
	// control. An error means the work could not be run at all (unknown
	// driver, missing routine file); a process that ran and failed is a
	// Result with a non-zero exit code, not an error.
	Execute(ctx context.Context, a *decreev1.Assignment, workspace string, out io.Writer) (*Result, error)
}

// Result is how an assignment ended.
type Result struct {
	// Status is the exit status reported to the controller.
	Status *decreev1.ExitStatus
	// Output is the router's answer (its stdout), for ASSIGNMENT_KIND_ROUTER.
	Output []byte
}

// Options configure Run. Only Controller (or Workspace, from which the
// default address derives) matters for a local setup; the rest has defaults.
type Options struct {
	// Controller is the address to dial: "unix:///abs/path/.decree/decree.sock",
	// an absolute socket path, or "host:port". Empty means the unix socket
	// of Workspace (DefaultControllerAddress).
	Controller string
	// DialOptions are added to the gRPC dial (TLS, per-RPC tokens). Without
	// transport credentials among them the connection is insecure.
	DialOptions []grpc.DialOption
	// WorkerID is the stable worker id; empty means the id kept in
	// <workspace>/.decree/worker-id, created on first use.
	WorkerID string
	// Labels are free key=value labels matched against routine requirements.
	Labels map[string]string
	// Workspace is the project directory the worker runs in ("." when empty).
	Workspace string
	// Drivers are advertised to the controller. When nil: the executor's
	// own list if it has a method Drivers() []*decreev1.DriverInfo (the
	// default executor does), else DefaultDrivers().
	Drivers []*decreev1.DriverInfo
	// Version is reported to the controller (Version when empty).
	Version string
	// Logger receives the worker's own diagnostics (discarded when nil).
	Logger *slog.Logger
	// Executor runs assignments; NewDefaultExecutor(ExecOptions{}) when nil.
	Executor Executor
	// Backoff spaces reconnections and retried uploads (200ms..30s when zero).
	Backoff wbackoff.Policy
	// Logs, when set, carries the assignments' logs instead of the
	// connection's UploadLogs: a controller in the same process hands its
	// in-process UploadLogs here (controller.LocalLogs), whose Send stores
	// a chunk before it returns. The routine's output is then written
	// through at once (logship.Direct): no window, no uploader goroutine,
	// no copies, and no encoding or socket in between. Offsets, sequence
	// numbers, retries and refusals are those of the connection's path.
	// Only a client that stores in Send belongs here.
	Logs logship.Client
	// LogBufferBytes bounds the log bytes held unacknowledged per assignment
	// (DefaultLogBufferBytes when zero). A routine writing faster than the
	// upload blocks once this much is waiting.
	LogBufferBytes int
	// ShutdownTimeout is how long, after ctx ends, the worker keeps trying to
	// upload the stopped routine's remaining log and report its end
	// (DefaultShutdownTimeout when zero).
	ShutdownTimeout time.Duration
	// HeartbeatInterval is used when the controller does not give one
	// (DefaultHeartbeatPeriod when zero).
	HeartbeatInterval time.Duration
	// ExitAfter, when positive, makes a one-shot worker: after starting
	// this many assignments (of any kind: routine attempts, hooks, router
	// calls) it takes no more, reports them, and Run returns nil.
	ExitAfter int
	// ExitWhenIdle, when positive, makes Run return nil once no assignment
	// has come for this long (counted from the start and from the end of
	// each assignment).
	ExitWhenIdle time.Duration
}

// DefaultControllerAddress is the unix socket a controller serving the
// project at workspace listens on.
func DefaultControllerAddress(workspace string) string {
	abs, err := filepath.Abs(workspace)
	if err != nil {
		abs = workspace
	}
	return "unix://" + layout.SocketPath(abs)
}

// Run serves as a worker until ctx ends, then stops the current routine
// gracefully, reports it, and returns nil. It returns an error for bad
// options, or when the controller refuses the worker for good (invalid
// registration, not authorised, replica workspace).
func Run(ctx context.Context, opts Options) error {
	w, err := newWorker(opts)
	if err != nil {
		return err
	}
	defer w.conn.Close()
	if w.hold, err = holdLock(w.workspace, w.opts.WorkerID, w.log); err != nil {
		return fmt.Errorf("worker %s: %w", w.opts.WorkerID, err)
	}
	defer w.hold.Close()
	if c, ok := w.opts.Executor.(interface{ Close() }); ok {
		defer c.Close() // plugin drivers it launched
	}

	runCtx, cancelRun := context.WithCancel(ctx)
	defer cancelRun()
	drainCtx, stopDrain := drainContext(runCtx, w.opts.ShutdownTimeout)
	defer stopDrain()

	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		w.runJobs(runCtx, drainCtx, cancelRun)
	}()
	err = w.sessions(runCtx)
	cancelRun()
	wg.Wait()
	w.leave(drainCtx)
	if err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}

// drainContext is a context that outlives ctx by timeout, so a stopped
// routine's last log bytes and its result can still be sent.
func drainContext(ctx context.Context, timeout time.Duration) (context.Context, context.CancelFunc) {
	dctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	stop := context.AfterFunc(ctx, func() {
		t := time.AfterFunc(timeout, cancel)
		context.AfterFunc(dctx, func() { t.Stop() })
	})
	return dctx, func() { stop(); cancel() }
}

type worker struct {
	opts      Options
	log       *slog.Logger
	workspace string
	hostname  string
	conn      *grpc.ClientConn
	client    decreev1.WorkerServiceClient
	leases    *leaseSet
	kick      chan struct{} // asks for a heartbeat now
	hold      *os.File      // the worker's process lock, see holdLock
	queue     chan *decreev1.Assignment
	leaseTTL  atomic.Int64           // from the latest registration; 0 = unknown
	sid       atomic.Pointer[string] // the latest session id
	taken     atomic.Int64           // assignments started (ExitAfter)
	inPlace   atomic.Bool            // from the latest registration
	repMu     sync.Mutex
	rep       *replica.Replica // the replica state, once the controller said the workspace is one
}

func newWorker(opts Options) (*worker, error) {
	if opts.Workspace == "" {
		opts.Workspace = "."
	}
	ws, err := filepath.Abs(opts.Workspace)
	if err != nil {
		return nil, fmt.Errorf("worker: resolve workspace %q: %w", opts.Workspace, err)
	}
	if st, err := os.Stat(ws); err != nil || !st.IsDir() {
		return nil, fmt.Errorf("worker: workspace %s is not a directory; pass --workspace with the project directory", ws)
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Version == "" {
		opts.Version = Version
	}
	if opts.Executor == nil {
		opts.Executor = NewDefaultExecutor(ExecOptions{Logger: opts.Logger, PluginDirs: plugin.SearchDirs(opts.Workspace)})
	}
	if opts.Drivers == nil {
		if d, ok := opts.Executor.(interface{ Drivers() []*decreev1.DriverInfo }); ok {
			opts.Drivers = d.Drivers()
		} else {
			opts.Drivers = DefaultDrivers()
		}
	}
	if opts.LogBufferBytes <= 0 {
		opts.LogBufferBytes = DefaultLogBufferBytes
	}
	if opts.ShutdownTimeout <= 0 {
		opts.ShutdownTimeout = DefaultShutdownTimeout
	}
	if opts.HeartbeatInterval <= 0 {
		opts.HeartbeatInterval = DefaultHeartbeatPeriod
	}
	for k := range opts.Labels {
		if err := checkLabelKey(k); err != nil {
			return nil, err
		}
	}
	host, _ := os.Hostname()
	if opts.WorkerID == "" {
		id, err := persistentWorkerID(ws, host)
		if err != nil {
			opts.Logger.Warn("could not keep the worker id in the workspace; using a temporary one", "id", id, "err", err)
		}
		opts.WorkerID = id
	}
	target := opts.Controller
	switch {
	case target == "":
		target = DefaultControllerAddress(ws)
	case strings.HasPrefix(target, "/"):
		target = "unix://" + target
	}
	bp := opts.Backoff
	dial := []grpc.DialOption{
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		pauth.MessageSizeDialOption(),
		// Let the connection come back as fast as our own retries ask.
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: bp.Cap(0), Multiplier: 2, Jitter: 0.2, MaxDelay: bp.Cap(1 << 10)},
			MinConnectTimeout: 20 * time.Second,
		}),
	}
	dial = append(dial, opts.DialOptions...)
	conn, err := grpc.NewClient(target, dial...)
	if err != nil {
		return nil, fmt.Errorf("worker: controller address %q: %w", opts.Controller, err)
	}
	opts.Controller = target
	return &worker{
		opts:      opts,
		log:       opts.Logger.With("worker", opts.WorkerID),
		workspace: ws,
		hostname:  host,
		conn:      conn,
		client:    decreev1.NewWorkerServiceClient(conn),
		leases:    newLeaseSet(recentlyFinishedTracked),
		kick:      make(chan struct{}, 1),
		queue:     make(chan *decreev1.Assignment, 16),
	}, nil
}
