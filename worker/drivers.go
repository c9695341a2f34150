package worker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/decreehq/decree/pkg/config"
	"github.com/decreehq/decree/pkg/driver"
	"github.com/decreehq/decree/pkg/driver/notebook"
	"github.com/decreehq/decree/pkg/driver/plugin"
	"github.com/decreehq/decree/pkg/driver/shell"
	"github.com/decreehq/decree/pkg/fsutil"
	"github.com/decreehq/decree/pkg/routine"
	decreev1 "github.com/decreehq/decree/proto/decree/v1"
)

// BuiltinDrivers are the drivers linked into the worker: shell and notebook.
func BuiltinDrivers() driver.Set {
	return driver.Set{shell.Name: shell.New(), notebook.Name: notebook.New()}
}

// DriverInfos describes a driver set for RegisterWorker, sorted by name.
func DriverInfos(s driver.Set) []*decreev1.DriverInfo {
	names := make([]string, 0, len(s))
	for n := range s {
		names = append(names, n)
	}
	sort.Strings(names)
	out := make([]*decreev1.DriverInfo, 0, len(names))
	for _, n := range names {
		out = append(out, &decreev1.DriverInfo{Name: n, Extensions: routine.DriverExtensions(n)})
	}
	return out
}

// DefaultDrivers are the drivers the default executor advertises.
func DefaultDrivers() []*decreev1.DriverInfo { return DriverInfos(BuiltinDrivers()) }

// driverName is the driver a routine asks for (its format's when unnamed).
func driverName(r *decreev1.RoutineRef) string {
	if d := r.GetDriver(); d != "" {
		return d
	}
	if r.GetFormat() == decreev1.RoutineFormat_ROUTINE_FORMAT_UNSPECIFIED {
		return ""
	}
	f := routine.Format(strings.ToLower(strings.TrimPrefix(r.GetFormat().String(), "ROUTINE_FORMAT_")))
	if _, ok := f.Info(); !ok {
		return ""
	}
	return f.Driver()
}

// runRoutine runs a routine or hook with its pkg/driver driver, stopping it
// (process group, grace period) when ctx ends.
func runRoutine(ctx context.Context, o ExecOptions, plugins *plugin.Pool, a *decreev1.Assignment, ws string, out io.Writer) (*Result, error) {
	r := a.GetRoutine()
	if r == nil {
		return nil, fmt.Errorf("assignment for %s names no routine; the controller must send one", a.GetMessageId())
	}
	name := driverName(r)
	if name == "" {
		return nil, fmt.Errorf("routine %s names no driver and no known format; the controller must send one", r.GetName())
	}
	var d driver.Driver
	if builtin, ok := o.Drivers[name]; ok {
		d = builtin
	} else {
		var err error
		if d, err = plugins.Get(ctx, name); err != nil {
			return nil, fmt.Errorf("routine %s: %w", r.GetName(), err)
		}
	}
	path, err := routineFile(ws, r)
	if err != nil {
		return nil, err
	}
	msgDir := ""
	if a.GetMessageDir() != "" {
		if msgDir, err = fsutil.ConfinedJoin(ws, a.GetMessageDir()); err != nil {
			return nil, fmt.Errorf("run directory of %s: %w", a.GetMessageId(), err)
		}
	}
	var env []string
	for _, k := range sortedKeys(a.GetEnv()) {
		env = append(env, k+"="+workspaceEnv(ws, k, a.GetEnv()[k]))
	}
	h, err := d.Start(ctx, driver.TaskConfig{
		Routine:        r.GetName(),
		Path:           path,
		Workdir:        ws,
		Params:         a.GetParams(),
		Env:            env,
		MessageDir:     msgDir,
		Timeout:        timeoutOf(a),
		KillGrace:      o.Grace,
		NotebookEngine: a.GetNotebookEngine(),
		Tree:           treeSettings(a),
		Output:         out,
		Logger:         o.Logger,
		Fence:          fenceFrom(ctx),
	})
	if err != nil {
		return nil, err
	}
	go func() {
		for range h.Events() { // output goes to out; only the exit event comes here
		}
	}()
	res := waitStopping(ctx, h, o.Grace)
	return &Result{Status: exitStatus(res)}, nil
}

// treeSettings returns the assignment's decision-tree settings, nil when
// the controller sent none (the tree driver then uses the defaults).
func treeSettings(a *decreev1.Assignment) *config.TreeSettings {
	if a.GetTree() == nil {
		return nil
	}
	t := config.TreeSettingsFromProto(a.GetTree())
	return &t
}

// waitStopping waits for h, stopping it (grace, then kill) when ctx ends
// first.
func waitStopping(ctx context.Context, h driver.Handle, grace time.Duration) driver.ExitResult {
	finished := make(chan struct{})
	defer close(finished)
	go func() {
		select {
		case <-ctx.Done():
			_ = h.Stop(killGrace(ctx, grace))
		case <-finished:
		}
	}()
	res, _ := h.Wait(context.Background()) // cannot fail without a deadline
	return res
}

// errStoppedByController is the cause of work the controller asked to
// stop (cancelled, interrupted, or its lease given up).
var errStoppedByController = errors.New("the controller stopped this work (cancelled, or the lease was lost)")

// killGrace is the SIGTERM -> SIGKILL delay for work stopped because ctx
// ended: grace, except that work the controller stopped must be gone,
// and reported, while its lease still holds. The controller no longer
// renews such a lease, and a report that arrives after the lease ran out
// is ignored (the attempt counts as lost, not stopped). So the delay ends
// a fifth of the lease's remaining time (at most 2s) before the lease
// does.
func killGrace(ctx context.Context, grace time.Duration) time.Duration {
	if !errors.Is(context.Cause(ctx), errStoppedByController) {
		return grace
	}
	f := fenceFrom(ctx)
	if f == nil || f.Lease == nil {
		return grace
	}
	left := f.Lease.Remaining()
	return max(0, min(grace, left-min(2*time.Second, left/5)))
}

// exitStatus maps a driver result to the wire. Error stays empty for a
// routine that simply exited non-zero (the exit code says it all) and for
// one stopped on request (the worker adds why).
func exitStatus(res driver.ExitResult) *decreev1.ExitStatus {
	st := &decreev1.ExitStatus{
		ExitCode: int32(res.ExitCode),
		Signal:   int32(res.Signal),
		TimedOut: res.TimedOut,
		Duration: durationpb.New(res.Duration),
	}
	switch {
	case res.TimedOut:
		st.Error = res.Message
	case res.Signal != 0 && !res.Stopped:
		st.Error = res.Message
	}
	if res.Err != nil {
		if st.Error != "" {
			st.Error += "; "
		}
		st.Error += res.Err.Error()
	}
	return st
}

// routineFile finds the routine of an in-place worker at RoutineRef.path
// (relative to the workspace, or absolute for a shared routine).
func routineFile(ws string, r *decreev1.RoutineRef) (string, error) {
	p := r.GetPath()
	if p == "" {
		return "", fmt.Errorf("routine %s has no path; the controller must send where it lives", r.GetName())
	}
	full := p
	if !filepath.IsAbs(p) {
		var err error
		if full, err = fsutil.ConfinedJoin(ws, p); err != nil {
			return "", fmt.Errorf("routine %s: %w", r.GetName(), err)
		}
	}
	if _, err := os.Stat(full); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return "", fmt.Errorf("routine %s: %s does not exist in workspace %s; an in-place worker must run in the controller's project directory", r.GetName(), p, ws)
		}
		return "", fmt.Errorf("routine %s: %w", r.GetName(), err)
	}
	return full, nil
}

// workspacePathEnv are assignment variables holding a path relative to
// the workspace (the usage, question and reply files in the run
// directory): the routine gets them absolute, so it may change directory
// and still find them.
var workspacePathEnv = map[string]bool{"DECREE_USAGE_FILE": true, "DECREE_ASK_FILE": true, "DECREE_REPLY_FILE": true}

// workspaceEnv returns the value of assignment variable k for the routine.
func workspaceEnv(ws, k, v string) string {
	if !workspacePathEnv[k] || v == "" || filepath.IsAbs(v) {
		return v
	}
	if abs, err := fsutil.ConfinedJoin(ws, v); err == nil {
		return abs
	}
	return v
}
