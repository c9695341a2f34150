package cli

import (
	"fmt"

	"github.com/decreehq/decree/controller/pipeline"
	"github.com/decreehq/decree/pkg/config"
	"github.com/decreehq/decree/pkg/layout"
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
			path := layout.Path(root, layout.Config)
			cfg, _, err := config.Load(path)
			if err != nil {
				return err
			}
			rep, err := routine.Sync(pipeline.Library(root, cfg), cfg.Routines, cfg.SharedRoutines)
			if err != nil {
				return err
			}
			for _, n := range rep.Added {
				fmt.Fprintf(g.stdout, "added       %s (enabled)\n", n)
			}
			for _, n := range rep.AddedShared {
				fmt.Fprintf(g.stdout, "added       shared:%s (disabled; enable it in config.yml)\n", n)
			}
			for _, n := range rep.Deprecated {
				fmt.Fprintf(g.stdout, "deprecated  %s (its file is gone)\n", n)
			}
			for _, n := range rep.Restored {
				fmt.Fprintf(g.stdout, "restored    %s\n", n)
			}
			if !rep.Changed() {
				fmt.Fprintln(g.stderr, "decree: the registry is up to date")
				return nil
			}
			return config.WriteRegistry(path, rep.Routines, rep.Shared)
		},
	}
}
