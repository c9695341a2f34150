// Package driver defines how decree runs a routine, in the shape of Nomad's
// task drivers: a Driver starts a task from a TaskConfig and returns a
// Handle; the Handle streams Events (output, then one exit event), can be
// waited on, and can be stopped (SIGTERM to the routine's whole process
// group, SIGKILL after a grace period).
//
// Built-in drivers live in subpackages: shell (bash NAME.sh) and notebook
// (papermill, or nbconvert with papermill-style parameter injection).
// External drivers are hashicorp/go-plugin gRPC plugins hosted by the plugin
// subpackage and written with plugin/sdk.
//
// # Output and backpressure
//
// A routine's stdout and stderr share one pipe, so their bytes arrive in the
// order the routine wrote them, exactly as written. Output reaches the
// consumer in one of two ways, chosen by TaskConfig.Output:
//
//   - Output set: every chunk is written to it synchronously and no output
//     events are sent (only the exit event). A slow writer slows the routine.
//   - Output nil: chunks arrive as EventOutput on Events(). The channel has a
//     small fixed buffer, so the consumer MUST drain Events() until it is
//     closed; while it does not read, the pipe fills and the routine blocks
//     in write(2). Wait does not return until the events are drained.
//
// Either way at most a few chunks of at most ChunkSize bytes are in flight,
// so a routine printing gigabytes does not grow anyone's memory.
//
// # Process lifetime
//
// Every routine runs under a per-attempt supervisor (pkg/supervisor, used
// by pkg/driver/proc) in its own process group with stdin from /dev/null.
// The supervisor owns the routine's whole process tree, including
// descendants that left the group or session (setsid, a Jupyter kernel):
// when the routine's main process exits, whatever it left running gets
// SIGTERM, then SIGKILL after the grace period; Stop does the same to the
// whole tree. The exit event and Wait come only after every process of the
// tree is gone. With TaskConfig.Fence the tree is also killed when the
// worker dies or stops renewing the attempt's lease.
package driver

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/decreehq/decree/pkg/config"
	"github.com/decreehq/decree/pkg/supervisor"
)

// ChunkSize is the largest output chunk a driver delivers at once.
const ChunkSize = 32 << 10

// DefaultKillGrace is the time between SIGTERM and SIGKILL when a routine
// times out or leaves processes behind and TaskConfig.KillGrace is zero.
const DefaultKillGrace = 5 * time.Second

// Driver starts routines of one kind.
type Driver interface {
	// Name is the driver's name ("shell", "notebook", "tree", ...).
	Name() string
	// Start launches the routine and returns once it is running. ctx bounds
	// only the start itself; use Handle.Stop to end the routine. Errors are
	// about the routine or the environment (bad script, missing engine) and
	// name the routine.
	Start(ctx context.Context, cfg TaskConfig) (Handle, error)
}

// Handle is a running routine.
type Handle interface {
	// Events streams the routine's output (unless TaskConfig.Output is set)
	// followed by exactly one EventExit, then is closed.
	Events() <-chan Event
	// Wait blocks until the routine and its output are finished and
	// returns the result. Its error is non-nil only when ctx ends first.
	Wait(ctx context.Context) (ExitResult, error)
	// Stop sends SIGTERM to the routine's process group, then SIGKILL after
	// grace if the routine has not exited, and returns once it has exited.
	Stop(grace time.Duration) error
}

// ProcessHandle is implemented by handles whose routine is a local process
// group (those of pkg/driver/proc). The plugin sdk reports it to the host,
// which kills the group itself if the plugin dies mid-run.
type ProcessHandle interface {
	Handle
	// Pid is the routine's main process id.
	Pid() int
	// ProcessGroup is the id of the routine's own process group.
	ProcessGroup() int
}

// TaskConfig is everything a driver needs to run one attempt of a routine.
type TaskConfig struct {
	// Routine is the routine's name, used in messages.
	Routine string
	// Path is the absolute path of the routine file.
	Path string
	// Workdir is the directory the routine runs in (the project root or the
	// worker's workspace).
	Workdir string
	// Params are the standard and custom parameters, name -> value. Only
	// these are injected; a custom parameter left out keeps the routine's
	// own default. Names must be valid identifiers.
	Params map[string]string
	// Env holds extra environment variables, "KEY=VALUE" (hooks add
	// DECREE_* variables here). The worker's own environment is inherited.
	Env []string
	// MessageDir is the run directory (.decree/runs/<id>); notebook drivers
	// write output.ipynb and papermill.log there.
	MessageDir string
	// Timeout caps the attempt; 0 means none. A timed-out routine is
	// stopped (grace KillGrace) and reported with exit code 1.
	Timeout time.Duration
	// KillGrace is the SIGTERM -> SIGKILL delay; 0 means DefaultKillGrace.
	KillGrace time.Duration
	// NotebookEngine is auto, papermill or nbconvert ("" means auto).
	NotebookEngine string
	// Tree holds the decision-tree settings (config.yml's tree: section);
	// nil means the defaults. Only the tree driver reads them.
	Tree *config.TreeSettings
	// Venv is the Python venv for notebooks; "" means $DECREE_VENV, else
	// <Workdir>/.decree/venv.
	Venv string
	// Output, when set, receives all output synchronously (see the package
	// documentation); Events then carries only the exit event.
	Output io.Writer
	// Logger receives notices (engine fallbacks and the like); nil
	// discards them.
	Logger *slog.Logger
	// Fence ties the routine's processes to the worker's lease (see
	// pkg/supervisor); nil means they end only by themselves, by Stop or
	// when the worker dies.
	Fence *supervisor.Fence
}

// Grace returns KillGrace or DefaultKillGrace.
func (c TaskConfig) Grace() time.Duration {
	if c.KillGrace > 0 {
		return c.KillGrace
	}
	return DefaultKillGrace
}

// Log returns the configured logger or one that discards.
func (c TaskConfig) Log() *slog.Logger {
	if c.Logger != nil {
		return c.Logger
	}
	return slog.New(slog.DiscardHandler)
}

// EventKind tells what an Event carries.
type EventKind int

// Event kinds.
const (
	// EventOutput carries a chunk of combined stdout/stderr in Data.
	EventOutput EventKind = iota + 1
	// EventExit carries the result in Exit; it is the last event.
	EventExit
)

// Event is one item of a routine's event stream.
type Event struct {
	Kind EventKind
	// Data is an output chunk; the receiver owns it.
	Data []byte
	// Exit is set on EventExit.
	Exit ExitResult
}

// ExitResult is how an attempt ended.
type ExitResult struct {
	// ExitCode is the routine's exit status: 128+N when killed by signal N,
	// 1 when it timed out, -1 when the driver itself failed (Err is set).
	ExitCode int
	// Signal is the signal number that killed the routine, or 0.
	Signal int
	// TimedOut is set when Timeout expired.
	TimedOut bool
	// Stopped is set when Stop ended the routine.
	Stopped bool
	// Message is a one-line human summary ("exit code 3", "timed out after
	// 2s", "killed by signal 9").
	Message string
	// Err is a driver-side failure (a plugin that crashed, an output sink
	// that failed, a notebook engine that broke); nil for a routine that
	// simply exited non-zero.
	Err error
	// Duration is the wall time from start to exit.
	Duration time.Duration
}

// Success reports whether the attempt succeeded.
func (r ExitResult) Success() bool { return r.ExitCode == 0 && r.Err == nil && !r.TimedOut }

// Run starts cfg with d, copies all output to w (when w is non-nil and
// cfg.Output is nil, output goes through the event stream into w) and
// waits for the result.
func Run(ctx context.Context, d Driver, cfg TaskConfig, w io.Writer) (ExitResult, error) {
	if cfg.Output == nil && w != nil {
		cfg.Output = w
	}
	h, err := d.Start(ctx, cfg)
	if err != nil {
		return ExitResult{}, err
	}
	go func() {
		for range h.Events() { // only the exit event: output went to cfg.Output
		}
	}()
	res, err := h.Wait(ctx)
	if err != nil {
		_ = h.Stop(cfg.Grace())
		return res, fmt.Errorf("run routine %s: %w", cfg.Routine, err)
	}
	return res, nil
}

// Set maps driver names to drivers.
type Set map[string]Driver
