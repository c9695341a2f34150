package worker

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/decreehq/decree/pkg/driver"
	"github.com/decreehq/decree/pkg/driver/plugin"
	"github.com/decreehq/decree/pkg/routine"
	decreev1 "github.com/decreehq/decree/proto/decree/v1"
)

// ExecOptions configure the default executor.
type ExecOptions struct {
	// Grace is the time between SIGTERM and SIGKILL of a stopped process
	// group (10s when zero).
	Grace time.Duration
	// RouterOutputLimit caps the router's answer (1 MiB when zero); a longer
	// answer fails the call.
	RouterOutputLimit int
	// Env is the base environment of router commands (os.Environ() when
	// nil); routines inherit the worker's environment through pkg/driver.
	Env []string
	// Drivers run routines and hooks by RoutineRef.driver
	// (BuiltinDrivers() when nil).
	Drivers driver.Set
	// Logger receives driver notices (discarded when nil).
	Logger *slog.Logger
	// PluginDirs are searched for external drivers (decree-driver-NAME)
	// when the executor is made; "$PATH" stands for the PATH directories.
	// Run sets it to plugin.SearchDirs(workspace) when nil.
	PluginDirs []string
}

// Defaults for ExecOptions.
const (
	DefaultGrace             = 10 * time.Second
	DefaultRouterOutputLimit = 1 << 20
)

// NewDefaultExecutor returns the built-in executor: routers run as
// `bash -c COMMAND`; routines and hooks run with the pkg/driver driver their
// RoutineRef names.
func NewDefaultExecutor(o ExecOptions) Executor {
	if o.Grace <= 0 {
		o.Grace = DefaultGrace
	}
	if o.RouterOutputLimit <= 0 {
		o.RouterOutputLimit = DefaultRouterOutputLimit
	}
	if o.Env == nil {
		o.Env = os.Environ()
	}
	if o.Drivers == nil {
		o.Drivers = BuiltinDrivers()
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	builtin := func(name string) bool { _, ok := o.Drivers[name]; return ok }
	return &defaultExecutor{o: o, plugins: plugin.NewPool(o.PluginDirs, builtin, o.Logger)}
}

type defaultExecutor struct {
	o       ExecOptions
	plugins *plugin.Pool
}

// Drivers describes the executor's drivers, built-in and plugins; Run
// advertises them when Options.Drivers is nil.
func (e *defaultExecutor) Drivers() []*decreev1.DriverInfo {
	infos := DriverInfos(e.o.Drivers)
	for _, n := range e.plugins.Names() {
		infos = append(infos, &decreev1.DriverInfo{Name: n, Extensions: routine.DriverExtensions(n)})
	}
	return infos
}

// Close stops the plugin drivers the executor launched.
func (e *defaultExecutor) Close() { e.plugins.Close() }

func (e *defaultExecutor) Execute(ctx context.Context, a *decreev1.Assignment, ws string, out io.Writer) (*Result, error) {
	switch a.GetKind() {
	case decreev1.AssignmentKind_ASSIGNMENT_KIND_ROUTER:
		return runRouter(ctx, e.o, a, ws, out)
	case decreev1.AssignmentKind_ASSIGNMENT_KIND_ROUTINE, decreev1.AssignmentKind_ASSIGNMENT_KIND_HOOK:
		return runRoutine(ctx, e.o, e.plugins, a, ws, out)
	case decreev1.AssignmentKind_ASSIGNMENT_KIND_PRE_CHECK:
		return runPreCheck(ctx, e.o, e.plugins, a, ws, out)
	}
	return nil, fmt.Errorf("assignment kind %v is not supported by this worker", a.GetKind())
}

// environment is base plus params and env (env wins), as NAME=value.
func environment(base []string, a *decreev1.Assignment) ([]string, error) {
	env := append([]string(nil), base...)
	for _, m := range []map[string]string{a.GetParams(), a.GetEnv()} {
		for _, k := range sortedKeys(m) {
			if !validEnvName(k) {
				return nil, fmt.Errorf("parameter %q of %s is not a valid environment variable name (letters, digits and _, not starting with a digit); rename it", k, a.GetMessageId())
			}
			env = append(env, k+"="+m[k])
		}
	}
	return env, nil
}

func validEnvName(k string) bool {
	if k == "" {
		return false
	}
	for i, r := range k {
		switch {
		case r == '_', r >= 'A' && r <= 'Z', r >= 'a' && r <= 'z':
		case r >= '0' && r <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}

func timeoutOf(a *decreev1.Assignment) time.Duration {
	if a.GetTimeout() == nil {
		return 0
	}
	return a.GetTimeout().AsDuration()
}
