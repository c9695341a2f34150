// Package controller assembles a decree controller for one project: the
// .decree/ store, the scheduler, the event log, attempt logs, leases for
// workers, checkpoints, and the processing loop, served over gRPC
// (ControllerService for clients, WorkerService for workers, plus the
// standard health and reflection services).
//
// A project has at most one controller at a time: New takes an exclusive
// lock on .decree/controller.lock, and a second controller fails with a
// message saying which socket to use instead.
package controller

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/decreehq/decree/controller/crontab"
	"github.com/decreehq/decree/controller/diskspace"
	"github.com/decreehq/decree/controller/events"
	"github.com/decreehq/decree/controller/lease"
	"github.com/decreehq/decree/controller/logbook"
	"github.com/decreehq/decree/controller/metrics"
	"github.com/decreehq/decree/controller/pipeline"
	"github.com/decreehq/decree/controller/replica"
	"github.com/decreehq/decree/controller/rpc"
	"github.com/decreehq/decree/controller/sched"
	"github.com/decreehq/decree/controller/store"
	"github.com/decreehq/decree/controller/tracing"
	pauth "github.com/decreehq/decree/pkg/auth"
	"github.com/decreehq/decree/pkg/checkpoint"
	"github.com/decreehq/decree/pkg/config"
	"github.com/decreehq/decree/pkg/layout"
	"github.com/decreehq/decree/pkg/routine"
	decreev1 "github.com/decreehq/decree/proto/decree/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// Options configure a controller.
type Options struct {
	// Root is the project directory (the one holding .decree/).
	Root string
	// Logger receives the controller's log; nil discards it.
	Logger *slog.Logger
	// LeaseTTL is how long a worker's lease lives without renewal
	// (default 10s).
	LeaseTTL time.Duration
	// HeartbeatInterval is what workers are told (LeaseTTL/3 when zero).
	// A stop (Ctrl-C, cancel) reaches a worker with its next heartbeat, so
	// decreectl's embedded controller, whose worker is local, uses a short
	// one.
	HeartbeatInterval time.Duration
	// MinFreeBytes is the free space below which processing pauses until
	// space is freed (diskspace.DefaultMinFree, 64 MiB, when zero).
	MinFreeBytes uint64
	// DiskFree replaces statfs(2) when set (fault injection in tests).
	DiskFree func(dir string) (uint64, error)
	// ForgetWorkersAfter is how long a worker that stopped heartbeating
	// stays registered (lease.DefaultForgetAfter, 10 minutes, when zero).
	ForgetWorkersAfter time.Duration
	// Poll is how often an idle loop looks for files dropped into the
	// inbox by hand (default 1s).
	Poll time.Duration
	// ServerOptions are added to the gRPC server (credentials, limits).
	ServerOptions []grpc.ServerOption
	// MaxBlobSize is the largest file a replica worker may send back
	// (replica.DefaultMaxBlobSize, 1 GiB, when zero).
	MaxBlobSize int64
	// NoProcessing serves the API without running the processing loop:
	// queued messages stay queued. decreectl uses it for an embedded
	// controller behind commands that only inspect or edit the project
	// (status, runs, requeue, ...), so that such a command never starts a
	// routine it would have to interrupt when it exits.
	NoProcessing bool
	// StartPaused holds the processing loop until the first message is
	// submitted or a process job starts (see pipeline.Deps.Paused).
	StartPaused bool
	// FixedWorkers says no other worker will join the ones that connect
	// first (decreectl's embedded controller and its local worker): a
	// routine that no connected worker can run is dead-lettered at once
	// instead of waiting (see pipeline.Deps.FixedWorkers).
	FixedWorkers bool
	// OwnChainsOnly processes only the chains submitted to this controller
	// (and everything once a process job starts): decreectl's embedded
	// controller behind `run` never touches other queued messages (see
	// pipeline.Deps.OwnChainsOnly).
	OwnChainsOnly bool
	// Daemon serves the project unattended: besides processing the inbox
	// as messages arrive, it fires the scheduled messages of .decree/cron/
	// (see controller/crontab), and GetStatus says a daemon serves the
	// project. decree-controller and `decreectl daemon` set it.
	Daemon bool
	// Metrics collects Prometheus metrics (controller/metrics) while
	// serving; MetricsHandler serves them.
	Metrics bool
	// Tracer, when set, writes OpenTelemetry spans of every message
	// (controller/tracing); its owner shuts it down after Serve.
	Tracer *tracing.Tracer
}

// Controller serves one project.
type Controller struct {
	opts   Options
	log    *slog.Logger
	lock   *os.File
	store  *store.Store
	events *events.Log
	leases *lease.Manager
	pipe   *pipeline.Pipeline
	cron   *crontab.Scheduler
	server *grpc.Server
	health *health.Server
	local  *rpc.LocalLogs // UploadLogs for a worker in this process
	book   *logbook.Book
	stats  *metrics.Metrics // nil unless Options.Metrics
	cp     *checkpoint.Checkpointer

	cfgMu   sync.Mutex
	cfg     *config.Config
	cfgMod  time.Time
	cfgSize int64
}

// New opens the project and prepares the controller; Serve starts it.
func New(opts Options) (*Controller, error) {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	root, err := filepath.Abs(opts.Root)
	if err != nil {
		return nil, err
	}
	opts.Root = root
	dot := filepath.Join(root, layout.Dir)
	if fi, err := os.Stat(dot); err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("%s is not a decree project (no .decree/ directory): run `decreectl init` there first", root)
	}
	lock, err := lockProject(dot)
	if err != nil {
		return nil, err
	}
	c := &Controller{opts: opts, log: log, lock: lock}
	if err := c.open(); err != nil {
		lock.Close()
		return nil, err
	}
	if opts.NoProcessing {
		// Work submitted here would never run: refuse it, so that a
		// client goes to the next controller instead.
		c.pipe.Stop()
	}
	return c, nil
}

func (c *Controller) open() error {
	root := c.opts.Root
	cfg, err := c.config()
	if err != nil {
		return err
	}
	loc, err := cfg.Location()
	if err != nil {
		return err
	}
	st, err := store.Open(root, store.Options{Logger: c.log, Location: loc, WatchInbox: true, DeferChains: c.opts.OwnChainsOnly})
	if err != nil {
		return err
	}
	c.store = st
	ev, err := events.Open(filepath.Join(st.Dir(), events.FileName), events.Options{Logger: c.log})
	if err != nil {
		return err
	}
	c.events = ev
	book := logbook.NewWithOptions(func(k logbook.Key) (string, error) {
		p, err := st.LogPath(k.MessageID, k.Attempt, k.Stream)
		if err != nil {
			return "", err
		}
		return p, os.MkdirAll(filepath.Dir(p), 0o755)
	}, logbook.Options{MaxBytes: c.maxLogBytes, Logger: c.log, WriteFailed: func(_ logbook.Key, err error) {
		if p := c.pipe; p != nil {
			p.WriteFailed(err)
		}
	}})
	c.book = book
	st.SetLogsEnded(book.WaitMessage)
	leases, err := lease.New(lease.Options{InstanceID: st.InstanceID(), LeaseTTL: c.opts.LeaseTTL, HeartbeatInterval: c.opts.HeartbeatInterval, ForgetAfter: c.opts.ForgetWorkersAfter, Logs: book, Logger: c.log,
		Journal: filepath.Join(st.Dir(), lease.JournalFile)})
	if err != nil {
		return err
	}
	c.leases = leases
	cp, err := checkpoint.New(checkpoint.Options{
		ObjectsDir: filepath.Join(st.Dir(), layout.Objects),
		CachePath:  filepath.Join(st.Dir(), layout.StatCache),
		Logger:     c.log,
	})
	if err != nil {
		return err
	}
	c.cp = cp
	rep, err := replica.New(replica.Options{Root: root, Objects: cp.Store(), Leases: leases, MaxBlobSize: c.opts.MaxBlobSize, Logger: c.log})
	if err != nil {
		return err
	}
	sch := sched.New(st, sched.Options{MaxDepth: cfg.MaxDepth, Logger: c.log})
	c.pipe = pipeline.New(pipeline.Deps{
		Store: st, Sched: sch, Events: ev, Leases: leases, Checkpoints: cp, Logs: book,
		Config: c.config, Logger: c.log, Poll: c.opts.Poll, Replica: rep, Paused: c.opts.StartPaused,
		FixedWorkers: c.opts.FixedWorkers, OwnChainsOnly: c.opts.OwnChainsOnly,
		Disk: diskspace.New(root, diskspace.Options{MinFree: c.opts.MinFreeBytes, Free: c.opts.DiskFree}),
	})
	if err := c.openCron(); err != nil {
		return err
	}
	if c.opts.Metrics {
		c.stats = metrics.New(metrics.Deps{Store: st, Events: ev, Leases: leases, Logger: c.log})
	}
	scrub := rpc.NewScrubber(root)
	serverOpts := append(append(pauth.MessageSizeServerOptions(),
		grpc.ChainUnaryInterceptor(scrub.Unary), grpc.ChainStreamInterceptor(scrub.Stream)),
		c.opts.ServerOptions...)
	if c.opts.Tracer != nil {
		c.opts.Tracer.Bind(st, c.log)
		serverOpts = append(serverOpts, c.opts.Tracer.ServerOptions()...)
	}
	c.server = grpc.NewServer(serverOpts...)
	decreev1.RegisterControllerServiceServer(c.server, rpc.NewControllerServer(rpc.ControllerDeps{
		Store: st, Pipeline: c.pipe, Service: pipeline.NewService(c.pipe), Events: ev, Leases: leases, Logs: book, Config: c.config, Version: Version,
		Cron: c.cron, Daemon: c.opts.Daemon,
	}))
	decreev1.RegisterWorkerServiceServer(c.server, rpc.NewWorkerServer(leases).WithReplica(rep).WithRunFiles(st))
	c.local = rpc.NewLocalLogs(leases, scrub)
	c.health = health.NewServer()
	healthpb.RegisterHealthServer(c.server, c.health)
	// Reflection serves the API's descriptors with their comments.
	if err := rpc.RegisterReflection(c.server); err != nil {
		return err
	}
	return nil
}

// stopGrace is how long Serve waits at least for the processing loop to
// end once asked to stop. It waits longer when the leases need it: an
// attempt under way is stopped by its worker, which may take the whole
// lease (a routine that ignores SIGTERM until the kill), and the loop
// must see that end to record the attempt as interrupted and put the
// tree back; see loopGrace.
const stopGrace = 10 * time.Second

// loopGrace is how long Serve waits for the processing loop to end: the
// longest a stopped attempt's dispatch can take, and a margin for the
// recording and the revert after it.
func (c *Controller) loopGrace() time.Duration {
	return max(stopGrace, c.leases.StopBound()+5*time.Second)
}

// maxLogBytes is max_log_bytes of the current configuration (the default
// while the configuration does not load).
func (c *Controller) maxLogBytes() uint64 {
	cfg, err := c.config()
	if err != nil || cfg.MaxLogBytes < 0 {
		return config.DefaultMaxLogBytes
	}
	return uint64(cfg.MaxLogBytes)
}

// healthServices are the names the health service answers for: "" (the
// server as a whole) and each decree service.
var healthServices = []string{"", decreev1.ControllerService_ServiceDesc.ServiceName, decreev1.WorkerService_ServiceDesc.ServiceName}

// Version is the controller's version string.
var Version = "dev"

// config loads .decree/config.yml, re-reading it only when it changed, and
// logs its warnings once per change.
func (c *Controller) config() (*config.Config, error) {
	path := layout.Path(c.opts.Root, layout.Config)
	fi, statErr := os.Stat(path)
	c.cfgMu.Lock()
	defer c.cfgMu.Unlock()
	if c.cfg != nil && statErr == nil && fi.ModTime().Equal(c.cfgMod) && fi.Size() == c.cfgSize {
		return c.cfg, nil
	}
	if c.cfg != nil && errors.Is(statErr, os.ErrNotExist) && c.cfgMod.IsZero() {
		return c.cfg, nil
	}
	cfg, warns, err := config.Load(path)
	if err != nil {
		return nil, err
	}
	// A hook naming no routine is a configuration error, reported now
	// rather than when the first message reaches the hook.
	if err := routine.ProjectLibrary(c.opts.Root, cfg).CheckHooks(cfg.Hooks); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	for _, w := range warns {
		c.log.Warn(w.String())
	}
	c.cfg = cfg
	if statErr == nil {
		c.cfgMod, c.cfgSize = fi.ModTime(), fi.Size()
	}
	return cfg, nil
}

// ListenUnix listens on .decree/decree.sock with mode 0600, replacing a
// stale socket left by a controller that died.
func ListenUnix(root string) (net.Listener, error) {
	sock := layout.SocketPath(root)
	if _, err := os.Lstat(sock); err == nil {
		if c, err := net.DialTimeout("unix", sock, 300*time.Millisecond); err == nil {
			c.Close()
			return nil, fmt.Errorf("a controller already serves %s; use it (decreectl finds it by itself) or stop it first", sock)
		}
		if err := os.Remove(sock); err != nil {
			return nil, fmt.Errorf("remove stale socket %s: %w", sock, err)
		}
	}
	old := syscall.Umask(0o177)
	lis, err := net.Listen("unix", sock)
	syscall.Umask(old)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", sock, err)
	}
	if err := os.Chmod(sock, 0o600); err != nil {
		lis.Close()
		return nil, fmt.Errorf("restrict %s to its owner: %w", sock, err)
	}
	return lis, nil
}

// Serve runs the processing loop and serves gRPC on every listener until
// ctx ends, then stops gracefully.
func (c *Controller) Serve(ctx context.Context, listeners ...net.Listener) error {
	if len(listeners) == 0 {
		return errors.New("serve: no listener")
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errc := make(chan error, len(listeners))
	for _, lis := range listeners {
		go func() {
			if err := c.server.Serve(lis); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
				errc <- fmt.Errorf("serve %s: %w", lis.Addr(), err)
				cancel()
			}
		}()
	}
	for _, name := range healthServices {
		c.health.SetServingStatus(name, healthpb.HealthCheckResponse_SERVING)
	}
	cronDone := c.runCron(ctx)
	// While the controller serves, the checkpointer watches the project
	// tree: a snapshot looks only at what changed (checkpoint.Serve).
	watchDone := make(chan struct{})
	go func() {
		defer close(watchDone)
		if c.opts.NoProcessing {
			return // nothing is checkpointed
		}
		if err := c.cp.Serve(ctx, c.store.Root()); err != nil {
			c.log.Warn("checkpoint watcher", "err", err)
		}
	}()
	statsDone := make(chan struct{})
	go func() {
		defer close(statsDone)
		if c.stats != nil {
			c.stats.Run(ctx)
		}
	}()
	traceDone := make(chan struct{})
	go func() {
		defer close(traceDone)
		if c.opts.Tracer != nil {
			c.opts.Tracer.Run(ctx, c.events)
		}
	}()
	loopDone := make(chan struct{})
	go func() {
		defer close(loopDone)
		if c.opts.NoProcessing {
			<-ctx.Done()
			return
		}
		if err := c.pipe.Run(ctx); err != nil {
			c.log.Error("processing loop", "err", err)
		}
	}()
	<-ctx.Done()
	c.health.Shutdown()
	select {
	case <-loopDone:
	case <-time.After(c.loopGrace()):
		// Never hang a shutdown: the loop is stuck in a call that does not
		// honour its context. Its attempt stays recorded as running, and
		// the next controller counts it as interrupted.
		c.log.Error("the processing loop did not stop within the grace period; stopping anyway", "grace", c.loopGrace())
	}
	<-cronDone
	select {
	case <-watchDone:
	case <-time.After(stopGrace): // a snapshot stuck with the loop
	}
	<-statsDone
	<-traceDone
	c.leases.Close()
	stopped := make(chan struct{})
	go func() { c.server.GracefulStop(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(5 * time.Second):
		c.server.Stop()
	}
	select {
	case err := <-errc:
		return err
	default:
		return nil
	}
}

// Close releases the project.
func (c *Controller) Close() error {
	if c.book != nil {
		// Logs of ended attempts are cut and synced in the background:
		// they are complete on disk when the controller is gone.
		c.book.Wait()
	}
	if c.events != nil {
		c.events.Close()
	}
	if c.store != nil {
		c.store.Close()
	}
	if c.lock != nil {
		c.lock.Close()
	}
	return nil
}

// LocalLogs is WorkerService.UploadLogs for a worker running in this
// process (decreectl's embedded worker, through worker.Options.Logs): its
// logs reach the log book without the socket's encoding and copies. A
// worker in another process uses the socket; see rpc.LocalLogs.
func (c *Controller) LocalLogs() *rpc.LocalLogs { return c.local }

// Pipeline exposes the processing loop (for embedding: decreectl waits for
// the chains other clients submitted before it stops its controller, and
// reports interrupted attempts).
func (c *Controller) Pipeline() *pipeline.Pipeline { return c.pipe }

// MetricsHandler serves the Prometheus metrics; nil unless
// Options.Metrics.
func (c *Controller) MetricsHandler() http.Handler {
	if c.stats == nil {
		return nil
	}
	return c.stats.Handler()
}

// Store exposes the project store (for tests and embedding).
func (c *Controller) Store() *store.Store { return c.store }

// ErrLocked is returned (wrapped) by New when another controller holds the
// project's lock.
var ErrLocked = errors.New("another controller is already running")

// lockPatience is how long a busy project lock is retried.
const lockPatience = time.Second

// lockProject takes the project's exclusive controller lock.
func lockProject(dot string) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(dot, layout.ControllerLock), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open controller lock: %w", err)
	}
	// A controller that just closed may still hold the lock for a moment:
	// a child process forked by another thread of it shares the lock until
	// it execs. So a busy lock is retried briefly before it counts.
	deadline := time.Now().Add(lockPatience)
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil || !errors.Is(err, syscall.EWOULDBLOCK) || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("%w for %s (it holds .decree/controller.lock); talk to it through .decree/%s", ErrLocked, filepath.Dir(dot), layout.Socket)
	}
	return f, nil
}
