// Package treedriver is the "tree" routine driver: it runs a decision tree
// (NAME.tree.csv or NAME.tree.json, see pkg/tree) with the engine of
// pkg/tree/engine. cmd/decree-driver-tree serves it as a go-plugin.
//
// Start checks the tree with the attempt's tree: settings (a broken chart
// fails at once, listing every problem), then runs the engine in a process
// of its own through pkg/driver/proc: the running binary started again
// (this package's init recognises EngineEnv and runs the engine instead of
// the program), with the job on its standard input. So a tree attempt is
// an ordinary routine process: in its own process group, under the
// attempt's supervisor (every CLI it starts belongs to the tree the
// supervisor kills on Stop, on the attempt timeout and when the lease is
// lost), its output streamed live. Each CLI call gets a process group of
// its own inside that tree, killed when the node's timeout passes.
package treedriver

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/decreehq/decree/pkg/config"
	"github.com/decreehq/decree/pkg/driver"
	"github.com/decreehq/decree/pkg/driver/proc"
	"github.com/decreehq/decree/pkg/routine"
	"github.com/decreehq/decree/pkg/tree"
)

// Name is the driver's name.
const Name = "tree"

// EngineEnv marks a process started to run the engine.
const EngineEnv = "DECREE_TREE_ENGINE"

// Driver runs decision trees. The zero value is ready to use.
type Driver struct{}

var _ driver.Driver = (*Driver)(nil)

// New returns a tree driver.
func New() *Driver { return &Driver{} }

// Name implements driver.Driver.
func (*Driver) Name() string { return Name }

// job is what the engine process reads on stdin.
type job struct {
	Path       string              `json:"path"`
	Routine    string              `json:"routine"`
	Workdir    string              `json:"workdir"`
	MessageDir string              `json:"message_dir"`
	Params     map[string]string   `json:"params"`
	Settings   config.TreeSettings `json:"settings"`
	Grace      time.Duration       `json:"grace"`
	Attempt    int                 `json:"attempt"`
}

// Start implements driver.Driver.
func (*Driver) Start(ctx context.Context, cfg driver.TaskConfig) (driver.Handle, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("start routine %s: %w", cfg.Routine, err)
	}
	settings := config.Default().Tree
	if cfg.Tree != nil {
		settings = *cfg.Tree
	}
	if _, err := tree.Load(cfg.Path, settings); err != nil {
		return nil, fmt.Errorf("routine %s: %w", cfg.Routine, err)
	}
	env, err := driver.Environ(cfg, true)
	if err != nil {
		return nil, err
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("routine %s: find the tree driver's own binary: %w", cfg.Routine, err)
	}
	in, err := json.Marshal(job{Path: cfg.Path, Routine: cfg.Routine, Workdir: cfg.Workdir, MessageDir: cfg.MessageDir,
		Params: cfg.Params, Settings: settings, Grace: cfg.Grace(), Attempt: attemptOf(env)})
	if err != nil {
		return nil, fmt.Errorf("routine %s: encode the tree job: %w", cfg.Routine, err)
	}
	h, err := proc.Start(proc.Spec{
		Path:    exe,
		Dir:     cfg.Workdir,
		Env:     append(env, EngineEnv+"=1"),
		Stdin:   in,
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

// attemptOf reads DECREE_ATTEMPT from an environment (the last wins).
func attemptOf(env []string) int {
	n := 0
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "DECREE_ATTEMPT="); ok {
			n, _ = strconv.Atoi(v)
		}
	}
	return n
}

// Inspect describes a tree routine for the plugin's Inspect call. Trees
// declare no custom parameters.
func Inspect(path string) (string, []routine.Param, error) {
	d, err := tree.Describe(path)
	return d, nil, err
}
