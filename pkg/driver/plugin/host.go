package plugin

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	goplugin "github.com/hashicorp/go-plugin"
	"golang.org/x/sys/unix"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/decreehq/decree/pkg/driver"
	"github.com/decreehq/decree/pkg/routine"
	"github.com/decreehq/decree/pkg/supervisor"
	decreev1 "github.com/decreehq/decree/proto/decree/v1"
)

// Driver is a launched driver plugin; it implements driver.Driver.
type Driver struct {
	path    string
	name    string
	exts    []string
	version string
	client  *goplugin.Client
	svc     decreev1.DriverServiceClient
	host    *os.File // write end of the host pipe, see Launch
}

var _ driver.Driver = (*Driver)(nil)

// Launch starts the plugin binary at path, checks the handshake and asks it
// to describe itself. Close it when done.
func Launch(ctx context.Context, path string, logger *slog.Logger) (*Driver, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	// The plugin holds the read end of a pipe whose write end only this
	// process has: end-of-file tells it the host died (go-plugin has no
	// such signal), and it exits, so its supervisors kill every routine it
	// ran.
	hostR, hostW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("start driver plugin %s: create the host pipe: %w", path, err)
	}
	cmd := exec.Command(path)
	cmd.ExtraFiles = []*os.File{hostR}
	cmd.Env = append(os.Environ(), HostFDEnv+"=3")
	client := goplugin.NewClient(&goplugin.ClientConfig{
		HandshakeConfig:  Handshake,
		Plugins:          PluginSet(nil),
		Cmd:              cmd,
		AllowedProtocols: []goplugin.Protocol{goplugin.ProtocolGRPC},
		Logger: hclog.New(&hclog.LoggerOptions{
			Name:   "driver",
			Output: &slogWriter{log: logger.With("plugin", path)},
			Level:  hclog.Info,
		}),
		StartTimeout: 30 * time.Second,
	})
	rpc, err := client.Client()
	hostR.Close()
	if err != nil {
		hostW.Close()
		client.Kill()
		return nil, fmt.Errorf("start driver plugin %s: %w (is it a decree driver built for protocol version %d?)", path, err, ProtocolVersion)
	}
	raw, err := rpc.Dispense(PluginName)
	if err != nil {
		hostW.Close()
		client.Kill()
		return nil, fmt.Errorf("driver plugin %s: %w", path, err)
	}
	svc := raw.(decreev1.DriverServiceClient)
	desc, err := svc.Describe(ctx, &decreev1.DescribeRequest{})
	if err != nil {
		hostW.Close()
		client.Kill()
		return nil, fmt.Errorf("driver plugin %s: describe: %w", path, err)
	}
	return &Driver{path: path, name: desc.GetName(), exts: desc.GetExtensions(), version: desc.GetVersion(), client: client, svc: svc, host: hostW}, nil
}

// Name implements driver.Driver with the name the plugin reported.
func (d *Driver) Name() string { return d.name }

// Extensions returns the routine file suffixes the plugin handles.
func (d *Driver) Extensions() []string { return d.exts }

// Version returns the plugin's version string.
func (d *Driver) Version() string { return d.version }

// Close shuts the plugin down (gracefully, then by force after 2 s; the
// sdk kills the process groups of routines still running).
func (d *Driver) Close() {
	d.client.Kill()
	d.host.Close()
}

// Exited reports whether the plugin process has exited.
func (d *Driver) Exited() bool { return d.client.Exited() }

// Inspect asks the plugin for a routine file's description and custom
// parameters.
func (d *Driver) Inspect(ctx context.Context, path string) (string, []routine.Param, error) {
	resp, err := d.svc.Inspect(ctx, &decreev1.InspectRequest{Path: path})
	if err != nil {
		return "", nil, fmt.Errorf("driver %s: inspect %s: %w", d.name, path, err)
	}
	var ps []routine.Param
	for _, p := range resp.GetParameters() {
		ps = append(ps, routine.Param{Name: p.GetName(), Default: p.GetDefaultValue(), HasDefault: p.GetHasDefault()})
	}
	return resp.GetDescription(), ps, nil
}

// Start implements driver.Driver: it opens the Execute stream and returns
// once the plugin accepted the request.
func (d *Driver) Start(ctx context.Context, cfg driver.TaskConfig) (driver.Handle, error) {
	if err := driver.CheckParams(cfg.Routine, cfg.Params); err != nil {
		return nil, err
	}
	env := map[string]string{}
	for _, kv := range cfg.Env {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return nil, fmt.Errorf("routine %s: extra environment entry %q is not KEY=VALUE", cfg.Routine, kv)
		}
		env[k] = v
	}
	var id [8]byte
	_, _ = rand.Read(id[:])
	req := &decreev1.ExecuteRequest{
		ExecutionId: hex.EncodeToString(id[:]),
		RoutinePath: cfg.Path,
		Workdir:     cfg.Workdir,
		Params:      cfg.Params,
		Env:         env,
		MessageDir:  cfg.MessageDir,
	}
	if cfg.Timeout > 0 {
		req.Timeout = durationpb.New(cfg.Timeout)
	}
	if cfg.KillGrace > 0 {
		req.KillGrace = durationpb.New(cfg.KillGrace)
	}
	req.NotebookEngine = cfg.NotebookEngine
	if cfg.Tree != nil {
		req.Tree = cfg.Tree.Proto()
	}
	var lease *supervisor.Lease
	if cfg.Fence != nil && cfg.Fence.Lease != nil {
		lease = cfg.Fence.Lease
		req.LeaseDeadlineMonotonicNs, _ = lease.Watch()
	}
	// The stream outlives Start's ctx; it ends with the execution.
	sctx, cancel := context.WithCancel(context.Background())
	stream, err := d.svc.Execute(sctx, req)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("routine %s: driver %s: execute: %w", cfg.Routine, d.name, err)
	}
	h := &handle{
		d: d, id: req.ExecutionId, cfg: cfg, cancel: cancel, start: time.Now(),
		events: make(chan driver.Event, 8), done: make(chan struct{}),
	}
	go h.pump(stream)
	if lease != nil {
		go h.follow(lease)
	}
	return h, nil
}

// follow passes every extension of the lease on to the plugin, whose
// supervisor enforces it.
func (h *handle) follow(l *supervisor.Lease) {
	sent, changed := l.Watch()
	for {
		select {
		case <-changed:
		case <-h.done:
			return
		}
		var d int64
		d, changed = l.Watch()
		if d == sent {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err := h.d.svc.RenewLease(ctx, &decreev1.RenewLeaseRequest{ExecutionId: h.id, DeadlineMonotonicNs: d})
		cancel()
		if err == nil {
			sent = d
		}
	}
}

type handle struct {
	d      *Driver
	id     string
	cfg    driver.TaskConfig
	cancel context.CancelFunc
	start  time.Time
	events chan driver.Event
	done   chan struct{}
	result driver.ExitResult
	stopMu sync.Mutex
	stop   bool
}

func (h *handle) Events() <-chan driver.Event { return h.events }

func (h *handle) Wait(ctx context.Context) (driver.ExitResult, error) {
	select {
	case <-h.done:
		return h.result, nil
	case <-ctx.Done():
		return driver.ExitResult{}, fmt.Errorf("wait for routine %s: %w", h.cfg.Routine, ctx.Err())
	}
}

func (h *handle) Stop(grace time.Duration) error {
	select {
	case <-h.done:
		return nil
	default:
	}
	h.stopMu.Lock()
	h.stop = true
	h.stopMu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), grace+10*time.Second)
	defer cancel()
	_, err := h.d.svc.Stop(ctx, &decreev1.StopRequest{ExecutionId: h.id, Grace: durationpb.New(grace)})
	if err != nil {
		select {
		case <-h.done: // finished meanwhile
			return nil
		default:
		}
		return fmt.Errorf("stop routine %s: driver %s: %w", h.cfg.Routine, h.d.name, err)
	}
	select {
	case <-h.done:
	case <-ctx.Done():
	}
	return nil
}

// pump forwards the stream to the sink or the event channel and builds
// the result.
func (h *handle) pump(stream decreev1.DriverService_ExecuteClient) {
	defer h.cancel()
	var res driver.ExitResult
	var sinkErr error
	gotExit := false
	pgid := 0
	for {
		msg, err := stream.Recv()
		if err != nil {
			if !gotExit {
				if errors.Is(err, io.EOF) {
					err = errors.New("stream ended without an exit status")
				}
				res = driver.ExitResult{
					ExitCode: -1,
					Err:      fmt.Errorf("driver plugin %s (%s) failed during routine %s: %w", h.d.name, h.d.path, h.cfg.Routine, err),
				}
				res.Message = res.Err.Error()
				if pgid > 0 {
					// The plugin died without stopping its routine; the
					// routine's main process got SIGKILL with it, but what
					// it started may still run in its group.
					killGroup(pgid, h.cfg.Grace())
				}
			}
			break
		}
		switch ev := msg.GetEvent().(type) {
		case *decreev1.ExecuteResponse_Output:
			if h.cfg.Output != nil {
				if sinkErr == nil {
					if _, err := h.cfg.Output.Write(ev.Output); err != nil {
						sinkErr = fmt.Errorf("write routine output: %w", err)
					}
				}
			} else {
				h.events <- driver.Event{Kind: driver.EventOutput, Data: ev.Output}
			}
		case *decreev1.ExecuteResponse_Started:
			pgid = int(ev.Started.GetProcessGroup())
		case *decreev1.ExecuteResponse_Exit:
			gotExit = true
			res = fromStatus(ev.Exit)
		}
	}
	if res.Duration == 0 {
		res.Duration = time.Since(h.start)
	}
	h.stopMu.Lock()
	res.Stopped = res.Stopped || h.stop
	h.stopMu.Unlock()
	if sinkErr != nil && res.Err == nil {
		res.Err = sinkErr
	}
	h.result = res
	h.events <- driver.Event{Kind: driver.EventExit, Exit: res}
	close(h.events)
	close(h.done)
}

func fromStatus(s *decreev1.ExitStatus) driver.ExitResult {
	res := driver.ExitResult{
		ExitCode: int(s.GetExitCode()),
		Signal:   int(s.GetSignal()),
		TimedOut: s.GetTimedOut(),
		Message:  s.GetError(),
		Duration: s.GetDuration().AsDuration(),
	}
	if res.Message == "" {
		res.Message = fmt.Sprintf("exit code %d", res.ExitCode)
	}
	if res.ExitCode == -1 {
		res.Err = errors.New(res.Message)
	}
	return res
}

// ToStatus converts a result for the wire (used by the sdk).
func ToStatus(r driver.ExitResult) *decreev1.ExitStatus {
	msg := r.Message
	if r.Err != nil {
		msg = r.Err.Error()
	}
	return &decreev1.ExitStatus{
		ExitCode: int32(r.ExitCode),
		Signal:   int32(r.Signal),
		TimedOut: r.TimedOut,
		Error:    msg,
		Duration: durationpb.New(r.Duration),
	}
}

// slogWriter turns the plugin's log lines (hclog output, including the
// plugin's stderr) into slog records.
type slogWriter struct {
	log *slog.Logger
	mu  sync.Mutex
}

func (w *slogWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	sc := bufio.NewScanner(strings.NewReader(string(p)))
	for sc.Scan() {
		if line := strings.TrimSpace(sc.Text()); line != "" {
			w.log.Info(line)
		}
	}
	return len(p), nil
}

// killGroup ends what is left of a routine's process group after its plugin
// died: SIGTERM, then SIGKILL once grace has passed with members left. A
// group id stays reserved while any member lives, so it cannot name an
// unrelated group until the last member is gone.
func killGroup(pgid int, grace time.Duration) {
	if pgid <= 1 || unix.Kill(-pgid, unix.SIGTERM) != nil {
		return // gone already
	}
	deadline := time.Now().Add(grace)
	for time.Now().Before(deadline) {
		if unix.Kill(-pgid, 0) != nil {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	_ = unix.Kill(-pgid, unix.SIGKILL)
}
