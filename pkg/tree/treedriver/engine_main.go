package treedriver

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/decreehq/decree/pkg/tree"
	"github.com/decreehq/decree/pkg/tree/engine"
)

func init() {
	if os.Getenv(EngineEnv) != "1" {
		return
	}
	os.Exit(engineMain(os.Stdin, os.Stdout))
}

// Exit codes of the engine process.
const (
	exitFailed  = 1 // a step failed (the last line says why)
	exitBadTree = 2 // the tree or the job could not be read
	exitStopped = 143
)

// engineMain runs one job read from in, reporting on out.
func engineMain(in io.Reader, out io.Writer) int {
	os.Unsetenv(EngineEnv) // the CLIs must not become engines
	var j job
	if err := json.NewDecoder(in).Decode(&j); err != nil {
		fmt.Fprintf(out, "tree: read the job from the tree driver: %v\n", err)
		return exitBadTree
	}
	t, err := tree.Load(j.Path, j.Settings)
	if err != nil {
		fmt.Fprintf(out, "tree: %v\n", err)
		return exitBadTree
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	err = engine.Run(ctx, engine.Options{Tree: t, Routine: j.Routine, Workdir: j.Workdir, Params: j.Params,
		RunDir: j.MessageDir, Attempt: j.Attempt, Output: out, Grace: j.Grace})
	switch {
	case err == nil:
		return 0
	case ctx.Err() != nil:
		return exitStopped
	}
	return exitFailed
}
