// Package notebook is the built-in driver for .ipynb routines.
//
// Engines (TaskConfig.NotebookEngine, config key notebook_engine):
//
//   - papermill: runs exactly what spec 07 shows,
//     `papermill ROUTINE.ipynb MSGDIR/output.ipynb -p spec_file V ... -p seq V
//     [-p CUSTOM V ...]`, with papermill taken from the venv ($DECREE_VENV or
//     .decree/venv, see VenvDir) or PATH. When it is missing, EnsureVenv
//     creates the venv and pip-installs papermill and ipykernel; if that
//     fails the run fails with an error saying what to do.
//   - nbconvert: decree injects the parameters itself the papermill way (a
//     code cell tagged "injected-parameters" right after the cell tagged
//     "parameters", or at the top when there is none, as papermill does) and
//     executes the notebook with nbconvert's executor (nbclient), through a
//     short script run by the Python that runs `jupyter nbconvert`. Plain
//     `jupyter nbconvert --execute` is not used because it writes no output
//     notebook when a cell fails and runs the kernel in the notebook's
//     directory; the script keeps papermill's behaviour instead: the first
//     failing cell (for example a %%bash cell exiting non-zero) stops the
//     run with exit code 1, output.ipynb is written anyway with the outputs
//     so far, and the kernel runs in the project root.
//   - auto (the default): papermill when present or installable, else
//     nbconvert, with a logged notice.
//
// Both engines write MSGDIR/output.ipynb and MSGDIR/papermill.log (the
// engine's combined stdout and stderr, which is also streamed as output
// events). Parameters are additionally exported as environment variables,
// so %%bash cells can use $chain, $seq and the rest as spec 06's follow-up
// example does.
//
// Stopping: the engine runs under the attempt's supervisor (pkg/supervisor),
// which owns the kernel and everything its cells start although the kernel
// runs in a session of its own: a timed-out or stopped notebook leaves no
// process behind, background %%bash children included, with either engine.
package notebook

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/decreehq/decree/pkg/driver"
	"github.com/decreehq/decree/pkg/driver/proc"
	"github.com/decreehq/decree/pkg/layout"
	"github.com/decreehq/decree/pkg/routine"
)

// Name is the driver's name.
const Name = "notebook"

// Engines.
const (
	EngineAuto      = "auto"
	EnginePapermill = "papermill"
	EngineNbconvert = "nbconvert"
)

//go:embed runner.py
var runnerPy string

// Driver runs notebook routines.
type Driver struct {
	// Python creates venvs; "" means "python3".
	Python string

	mu         sync.Mutex
	venvFailed map[string]error // venv -> why EnsureVenv failed (not retried)
}

var _ driver.Driver = (*Driver)(nil)

// New returns a notebook driver.
func New() *Driver { return &Driver{} }

// Name implements driver.Driver.
func (d *Driver) Name() string { return Name }

// ensureVenv runs EnsureVenv once per venv and process: a failed
// installation (no package index) is not retried on every attempt.
func (d *Driver) ensureVenv(ctx context.Context, venv string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err, ok := d.venvFailed[venv]; ok {
		return err
	}
	err := EnsureVenv(ctx, d.Python, venv)
	if err == nil && FindPapermill(venv) == "" {
		err = fmt.Errorf("venv %s has no bin/papermill after installation", venv)
	}
	if err != nil && ctx.Err() == nil {
		if d.venvFailed == nil {
			d.venvFailed = map[string]error{}
		}
		d.venvFailed[venv] = err
	}
	return err
}

// Start implements driver.Driver.
func (d *Driver) Start(ctx context.Context, cfg driver.TaskConfig) (driver.Handle, error) {
	src, err := os.ReadFile(cfg.Path)
	if err != nil {
		return nil, fmt.Errorf("routine %s: read notebook: %w", cfg.Routine, err)
	}
	if err := routine.CheckNotebook(src); err != nil {
		return nil, fmt.Errorf("routine %s (%s): %w", cfg.Routine, cfg.Path, err)
	}
	if cfg.MessageDir == "" {
		return nil, fmt.Errorf("routine %s: notebook routines need a message directory for output.ipynb", cfg.Routine)
	}
	env, err := driver.Environ(cfg, true)
	if err != nil {
		return nil, err
	}
	if _, set := os.LookupEnv(quietDebugger); !set {
		// ipykernel's debugger otherwise prints a frozen-modules warning
		// into every run's log; it does not affect execution.
		env = append(env, quietDebugger+"=1")
	}
	engine := cfg.NotebookEngine
	if engine == "" {
		engine = EngineAuto
	}
	log := cfg.Log()
	var papermill, notice string
	switch engine {
	case EngineNbconvert:
	case EngineAuto, EnginePapermill:
		venv := VenvDir(cfg)
		papermill = FindPapermill(venv)
		if papermill == "" {
			if err := d.ensureVenv(ctx, venv); err != nil {
				if engine == EnginePapermill {
					return nil, fmt.Errorf("routine %s: notebook_engine is papermill but papermill is not available: %w", cfg.Routine, err)
				}
				notice = fmt.Sprintf("decree: papermill is not available (%v); running the notebook with jupyter nbconvert instead\n", err)
				log.Warn("papermill unavailable, falling back to nbconvert", "routine", cfg.Routine, "err", err)
			} else {
				papermill = FindPapermill(venv)
			}
		}
	default:
		return nil, fmt.Errorf("routine %s: unknown notebook_engine %q; use auto, papermill or nbconvert", cfg.Routine, engine)
	}

	outPath := filepath.Join(cfg.MessageDir, layout.NotebookOutput)
	logPath := filepath.Join(cfg.MessageDir, layout.PapermillLog)
	spec := proc.Spec{Dir: cfg.Workdir, Env: env, Timeout: cfg.Timeout, Grace: cfg.Grace(), Output: cfg.Output, Fence: cfg.Fence}
	var cleanup []string
	if papermill != "" {
		spec.Path = papermill
		spec.Args = []string{cfg.Path, outPath}
		for _, k := range routine.OrderedParams(cfg.Params) {
			spec.Args = append(spec.Args, "-p", k, cfg.Params[k])
		}
	} else {
		py, err := jupyterPython()
		if err != nil {
			return nil, fmt.Errorf("routine %s: %w", cfg.Routine, err)
		}
		injected, err := InjectParameters(src, cfg.Params)
		if err != nil {
			return nil, fmt.Errorf("routine %s (%s): %w", cfg.Routine, cfg.Path, err)
		}
		tmp, err := os.CreateTemp("", "decree-"+cfg.Routine+"-*.ipynb")
		if err != nil {
			return nil, fmt.Errorf("routine %s: write injected notebook: %w", cfg.Routine, err)
		}
		_, werr := tmp.Write(injected)
		cerr := tmp.Close()
		cleanup = append(cleanup, tmp.Name())
		if err := errors.Join(werr, cerr); err != nil {
			os.Remove(tmp.Name())
			return nil, fmt.Errorf("routine %s: write injected notebook: %w", cfg.Routine, err)
		}
		spec.Path = py
		spec.Args = []string{"-c", runnerPy, tmp.Name(), outPath}
	}
	logf, err := os.Create(logPath)
	if err != nil {
		removeAll(cleanup)
		return nil, fmt.Errorf("routine %s: create %s: %w", cfg.Routine, logPath, err)
	}
	if notice != "" {
		_, _ = logf.WriteString(notice)
	}
	spec.Tee = logf
	spec.Finish = func(res *driver.ExitResult) {
		if err := logf.Close(); err != nil && res.Err == nil {
			res.Err = fmt.Errorf("write %s: %w", logPath, err)
		}
		removeAll(cleanup)
		_, statErr := os.Stat(outPath)
		switch {
		case res.ExitCode == 0 && statErr != nil && res.Err == nil:
			res.ExitCode = -1
			res.Err = fmt.Errorf("routine %s: the notebook engine exited 0 but wrote no %s; see %s", cfg.Routine, outPath, logPath)
		case res.ExitCode != 0:
			res.Message += fmt.Sprintf("; notebook %s failed, see %s and %s", cfg.Routine, logPath, outPath)
		}
	}
	h, err := proc.Start(spec)
	if err != nil {
		logf.Close()
		removeAll(cleanup)
		return nil, fmt.Errorf("routine %s: %w", cfg.Routine, err)
	}
	return h, nil
}

// quietDebugger silences pydevd's file-validation warnings in the kernel.
const quietDebugger = "PYDEVD_DISABLE_FILE_VALIDATION"

func removeAll(paths []string) {
	for _, p := range paths {
		_ = os.Remove(p)
	}
}
