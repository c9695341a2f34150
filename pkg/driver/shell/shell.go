// Package shell is the built-in driver for .sh routines: it runs
// `bash ROUTINE.sh` in the workspace root with the standard and custom
// parameters as environment variables.
//
// The script is passed to bash as a file argument, so it does not need the
// executable bit or a shebang. A script with Windows (CRLF) line endings is
// refused with an error naming it, because bash would fail on every line
// with "$'\r': command not found".
package shell

import (
	"context"
	"fmt"
	"os"
	"os/exec"

	"github.com/decreehq/decree/pkg/driver"
	"github.com/decreehq/decree/pkg/driver/proc"
	"github.com/decreehq/decree/pkg/routine"
)

// Name is the driver's name.
const Name = "shell"

// Driver runs shell routines. The zero value is ready to use.
type Driver struct {
	// Bash is the bash binary; "" means "bash" looked up on PATH.
	Bash string
}

var _ driver.Driver = (*Driver)(nil)

// New returns a shell driver using bash from PATH.
func New() *Driver { return &Driver{} }

// Name implements driver.Driver.
func (d *Driver) Name() string { return Name }

// Start implements driver.Driver.
func (d *Driver) Start(ctx context.Context, cfg driver.TaskConfig) (driver.Handle, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("start routine %s: %w", cfg.Routine, err)
	}
	src, err := os.ReadFile(cfg.Path)
	if err != nil {
		return nil, fmt.Errorf("routine %s: read script: %w", cfg.Routine, err)
	}
	if err := routine.CheckShell(cfg.Routine, cfg.Path, src); err != nil {
		return nil, err
	}
	bash := d.Bash
	if bash == "" {
		bash = "bash"
	}
	bashPath, err := exec.LookPath(bash)
	if err != nil {
		return nil, fmt.Errorf("routine %s: bash is needed to run shell routines but was not found: %w; install bash or put it on PATH", cfg.Routine, err)
	}
	env, err := driver.Environ(cfg, true)
	if err != nil {
		return nil, err
	}
	h, err := proc.Start(proc.Spec{
		Path:    bashPath,
		Args:    []string{cfg.Path},
		Dir:     cfg.Workdir,
		Env:     env,
		Timeout: cfg.Timeout,
		Grace:   cfg.Grace(),
		Output:  cfg.Output,
		Fence:   cfg.Fence,
	})
	if err != nil {
		return nil, fmt.Errorf("routine %s: %w", cfg.Routine, err)
	}
	return h, nil
}
