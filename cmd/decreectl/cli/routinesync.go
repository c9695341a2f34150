package cli

import (
	"fmt"
	"io"

	"github.com/decreehq/decree/controller"
	"github.com/decreehq/decree/pkg/routine"
	"github.com/spf13/cobra"
)

// newRoutineSyncCmd registers the routines found on disk in config.yml:
// new project routines enabled, new shared ones disabled, vanished ones
// deprecated. It edits the project's files directly (no controller needed)
// and rewrites only the registry keys of config.yml.
func newRoutineSyncCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "routine-sync",
		Short: "Register the routines found on disk in .decree/config.yml",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			root, err := g.projectRoot()
			if err != nil {
				return err
			}
			rep, err := controller.SyncRoutines(root)
			if err != nil {
				return err
			}
			printSync(g.stdout, rep, "")
			if !rep.Changed() {
				fmt.Fprintln(g.stderr, "decree: the registry is up to date")
			}
			return nil
		},
	}
}

// printSync lists what a routine sync changed, each line after prefix.
func printSync(w io.Writer, rep routine.SyncReport, prefix string) {
	for _, n := range rep.Added {
		fmt.Fprintf(w, "%sadded       %s (enabled)\n", prefix, n)
	}
	for _, n := range rep.AddedShared {
		fmt.Fprintf(w, "%sadded       shared:%s (disabled; enable it in config.yml)\n", prefix, n)
	}
	for _, n := range rep.Deprecated {
		fmt.Fprintf(w, "%sdeprecated  %s (its file is gone)\n", prefix, n)
	}
	for _, n := range rep.Restored {
		fmt.Fprintf(w, "%srestored    %s\n", prefix, n)
	}
}

// syncAtStart runs routine discovery before a command that processes
// messages on this machine's project (process, daemon), reporting changes
// on stderr. A remote controller (--controller) syncs its own project.
func (g *globals) syncAtStart() error {
	if g.controller != "" {
		return nil
	}
	root, err := g.projectRoot()
	if err != nil {
		return err
	}
	rep, err := controller.SyncRoutines(root)
	if err != nil {
		return fmt.Errorf("routine discovery: %w", err)
	}
	printSync(g.stderr, rep, "decree: routine-sync: ")
	return nil
}
