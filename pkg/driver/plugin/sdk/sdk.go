// Package sdk turns a driver.Driver into a decree driver plugin binary:
//
//	func main() {
//		sdk.Serve(mydriver.New(), sdk.Options{Extensions: []string{".tree.csv", ".tree.json"}})
//	}
//
// Build it as decree-driver-NAME and put it beside the worker, on PATH or
// in .decree/drivers/. Serve speaks go-plugin's gRPC protocol on stdout
// (nothing else may be printed there: log to stderr, which the host
// collects) and carries routine output inside the Execute stream.
//
// Process groups: the wrapped driver should start routines with
// pkg/driver/proc (as the built-in drivers do), so each routine has its own
// process group. Serve stops every running routine (SIGTERM to the group,
// SIGKILL after ShutdownGrace) when its Execute stream breaks (the host
// died or cancelled), on SIGTERM, and when the host shuts the plugin down.
// Each execution first reports its process group to the host, so that if
// the plugin itself is killed (SIGKILL, a crash) the host kills the group.
//
// Fencing: routines started through pkg/driver/proc run under a
// per-attempt supervisor (pkg/supervisor) that owns their whole process
// tree. The host passes the attempt's lease deadline in the Execute request
// and moves it with RenewLease; the supervisor kills the tree when it
// passes, even if the host says nothing more (stopped or hung). When the
// host dies, its pipe (plugin.HostFDEnv) reaches end-of-file and the plugin
// exits at once, so every supervisor it started kills its tree.
package sdk

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"syscall"
	"time"

	goplugin "github.com/hashicorp/go-plugin"

	"github.com/decreehq/decree/pkg/config"
	"github.com/decreehq/decree/pkg/driver"
	"github.com/decreehq/decree/pkg/driver/plugin"
	"github.com/decreehq/decree/pkg/routine"
	"github.com/decreehq/decree/pkg/supervisor"
	decreev1 "github.com/decreehq/decree/proto/decree/v1"
)

// ShutdownGrace is the SIGTERM -> SIGKILL delay used when the plugin stops
// routines on its own (host gone, shutdown). It is below go-plugin's 2 s
// wait before the host force-kills the plugin.
const ShutdownGrace = time.Second

// Options describe the plugin beyond what the driver itself says.
type Options struct {
	// Extensions are the routine file suffixes handled (".tree.csv").
	Extensions []string
	// Version is reported by Describe.
	Version string
	// Inspect reads a routine file for its description and custom
	// parameters; nil reports none.
	Inspect func(path string) (description string, params []routine.Param, err error)
}

// Serve runs the plugin until the host shuts it down. It does not return
// while routines are still running.
func Serve(d driver.Driver, opts Options) {
	s := NewServer(d, opts)
	go exitWithHost()
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM)
	go func() {
		<-sig
		s.StopAll(ShutdownGrace)
		os.Exit(0)
	}()
	goplugin.Serve(&goplugin.ServeConfig{
		HandshakeConfig: plugin.Handshake,
		Plugins:         plugin.PluginSet(s),
		GRPCServer:      goplugin.DefaultGRPCServer,
	})
	s.StopAll(ShutdownGrace)
}

// exitWithHost ends the plugin at once when the host pipe (see
// plugin.HostFDEnv) reaches end-of-file: the host died. The supervisors of
// running routines then see their control pipes close and kill every
// process of them.
func exitWithHost() {
	fd, err := strconv.Atoi(os.Getenv(plugin.HostFDEnv))
	if err != nil || fd < 3 {
		return // an older host: no pipe
	}
	f := os.NewFile(uintptr(fd), "host")
	_, _ = io.Copy(io.Discard, f)
	os.Exit(3)
}

// Server implements decreev1.DriverServiceServer over a driver.Driver.
type Server struct {
	decreev1.UnimplementedDriverServiceServer
	d    driver.Driver
	opts Options

	mu      sync.Mutex
	running map[string]driver.Handle
	leases  map[string]*supervisor.Lease
	// early holds Stop requests that arrived for an execution id whose
	// routine was still being started (the host may see the routine's
	// effects before Execute has registered it).
	early map[string]time.Duration
}

// NewServer wraps d; most plugins just call Serve.
func NewServer(d driver.Driver, opts Options) *Server {
	return &Server{d: d, opts: opts, running: map[string]driver.Handle{}, leases: map[string]*supervisor.Lease{}, early: map[string]time.Duration{}}
}

// Describe implements DriverService.
func (s *Server) Describe(context.Context, *decreev1.DescribeRequest) (*decreev1.DescribeResponse, error) {
	return &decreev1.DescribeResponse{Name: s.d.Name(), Extensions: s.opts.Extensions, Version: s.opts.Version}, nil
}

// Inspect implements DriverService.
func (s *Server) Inspect(_ context.Context, req *decreev1.InspectRequest) (*decreev1.InspectResponse, error) {
	if s.opts.Inspect == nil {
		return &decreev1.InspectResponse{}, nil
	}
	desc, ps, err := s.opts.Inspect(req.GetPath())
	if err != nil {
		return nil, err
	}
	resp := &decreev1.InspectResponse{Description: desc}
	for _, p := range ps {
		resp.Parameters = append(resp.Parameters, &decreev1.Parameter{Name: p.Name, DefaultValue: p.Default, Standard: routine.IsStandardParam(p.Name), HasDefault: p.HasDefault})
	}
	return resp, nil
}

// Execute implements DriverService: it starts the routine and streams its
// output and exit status. If the stream breaks, the routine is stopped.
func (s *Server) Execute(req *decreev1.ExecuteRequest, stream decreev1.DriverService_ExecuteServer) error {
	cfg := driver.TaskConfig{
		Routine:        routine.Stem(filepath.Base(req.GetRoutinePath())),
		Path:           req.GetRoutinePath(),
		Workdir:        req.GetWorkdir(),
		Params:         req.GetParams(),
		MessageDir:     req.GetMessageDir(),
		Timeout:        req.GetTimeout().AsDuration(),
		KillGrace:      req.GetKillGrace().AsDuration(),
		NotebookEngine: req.GetNotebookEngine(),
	}
	if req.GetTree() != nil {
		tree := config.TreeSettingsFromProto(req.GetTree())
		cfg.Tree = &tree
	}
	keys := make([]string, 0, len(req.GetEnv()))
	for k := range req.GetEnv() {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		cfg.Env = append(cfg.Env, k+"="+req.GetEnv()[k])
	}
	ctx := stream.Context()
	id := req.GetExecutionId()
	s.mu.Lock()
	if _, dup := s.running[id]; dup || id == "" {
		s.mu.Unlock()
		return fmt.Errorf("execution id %q is empty or already running", id)
	}
	s.running[id] = nil // reserved: a Stop from now on is remembered
	if d := req.GetLeaseDeadlineMonotonicNs(); d != 0 {
		l := supervisor.NewLeaseMonotonic(d)
		s.leases[id] = l
		cfg.Fence = &supervisor.Fence{Lease: l}
	}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.leases, id)
		s.mu.Unlock()
	}()
	h, err := s.d.Start(ctx, cfg)
	if err != nil {
		s.mu.Lock()
		delete(s.running, id)
		delete(s.early, id)
		s.mu.Unlock()
		return stream.Send(&decreev1.ExecuteResponse{Event: &decreev1.ExecuteResponse_Exit{
			Exit: plugin.ToStatus(driver.ExitResult{ExitCode: -1, Err: err}),
		}})
	}
	s.mu.Lock()
	s.running[id] = h
	grace, stopEarly := s.early[id]
	delete(s.early, id)
	s.mu.Unlock()
	if stopEarly {
		go func() { _ = h.Stop(grace) }()
	}
	if p, ok := h.(driver.ProcessHandle); ok {
		// First, so the host can clean up the group should this plugin die.
		if err := stream.Send(&decreev1.ExecuteResponse{Event: &decreev1.ExecuteResponse_Started{
			Started: &decreev1.ExecutionStarted{Pid: int32(p.Pid()), ProcessGroup: int32(p.ProcessGroup())},
		}}); err != nil {
			_ = h.Stop(ShutdownGrace)
		}
	}
	defer func() {
		s.mu.Lock()
		delete(s.running, id)
		s.mu.Unlock()
	}()
	finished := make(chan struct{})
	defer close(finished)
	go func() {
		select {
		case <-ctx.Done(): // host gone or cancelled
			_ = h.Stop(ShutdownGrace)
		case <-finished:
		}
	}()
	var sendErr error
	for ev := range h.Events() {
		if sendErr != nil {
			continue // keep draining so the routine can finish being stopped
		}
		var msg *decreev1.ExecuteResponse
		switch ev.Kind {
		case driver.EventOutput:
			msg = &decreev1.ExecuteResponse{Event: &decreev1.ExecuteResponse_Output{Output: ev.Data}}
		case driver.EventExit:
			msg = &decreev1.ExecuteResponse{Event: &decreev1.ExecuteResponse_Exit{Exit: plugin.ToStatus(ev.Exit)}}
		default:
			continue
		}
		if err := stream.Send(msg); err != nil {
			sendErr = err
			go func() { _ = h.Stop(ShutdownGrace) }()
		}
	}
	return sendErr
}

// Stop implements DriverService.
func (s *Server) Stop(_ context.Context, req *decreev1.StopRequest) (*decreev1.StopResponse, error) {
	grace := req.GetGrace().AsDuration()
	if grace <= 0 {
		grace = driver.DefaultKillGrace
	}
	s.mu.Lock()
	h, known := s.running[req.GetExecutionId()]
	if known && h == nil {
		s.early[req.GetExecutionId()] = grace // still starting: Execute stops it
	}
	s.mu.Unlock()
	if h == nil {
		return &decreev1.StopResponse{}, nil // finished, or stopped once started
	}
	if err := h.Stop(grace); err != nil {
		return nil, err
	}
	return &decreev1.StopResponse{}, nil
}

// RenewLease implements DriverService: it moves the execution's lease
// deadline, which the routine's supervisor enforces.
func (s *Server) RenewLease(_ context.Context, req *decreev1.RenewLeaseRequest) (*decreev1.RenewLeaseResponse, error) {
	s.mu.Lock()
	l := s.leases[req.GetExecutionId()]
	s.mu.Unlock()
	if l != nil {
		l.ExtendMonotonic(req.GetDeadlineMonotonicNs())
	}
	return &decreev1.RenewLeaseResponse{}, nil
}

// StopAll stops every running routine and waits until each has exited.
func (s *Server) StopAll(grace time.Duration) {
	s.mu.Lock()
	hs := make([]driver.Handle, 0, len(s.running))
	for _, h := range s.running {
		if h != nil {
			hs = append(hs, h)
		}
	}
	s.mu.Unlock()
	var wg sync.WaitGroup
	for _, h := range hs {
		wg.Add(1)
		go func() { defer wg.Done(); _ = h.Stop(grace) }()
	}
	wg.Wait()
}
