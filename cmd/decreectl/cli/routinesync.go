package cli

import (
	"fmt"
	"io"

	"github.com/decreehq/decree/pkg/routine"
	decreev1 "github.com/decreehq/decree/proto/decree/v1"
	"github.com/spf13/cobra"
)

// newRoutineSyncCmd asks the controller to register the routines found on
// disk in config.yml (SyncRoutines): new project routines enabled, new
// shared ones disabled, vanished ones deprecated; only the registry keys of
// config.yml are rewritten.
func newRoutineSyncCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "routine-sync",
		Short: "Register the routines found on disk in .decree/config.yml",
		Args:  cobra.NoArgs,
		RunE: withSession(g, func(cmd *cobra.Command, s *session, _ []string) error {
			rep, err := s.client.SyncRoutines(cmd.Context(), &decreev1.SyncRoutinesRequest{})
			if err != nil {
				return describe(err)
			}
			if g.output == "json" {
				return g.printJSON(rep)
			}
			sr := routine.SyncReport{Added: rep.GetAdded(), AddedShared: rep.GetAddedShared(), Deprecated: rep.GetDeprecated(), Restored: rep.GetRestored()}
			printSync(g.stdout, sr, "")
			if !sr.Changed() {
				fmt.Fprintln(g.stderr, "decree: the registry is up to date")
			}
			return nil
		}),
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
// on stderr. It runs before the embedded controller starts, so it calls
// the discovery library directly; a remote controller (--controller)
// syncs its own project when it starts.
func (g *globals) syncAtStart() error {
	if g.controller != "" {
		return nil
	}
	root, err := g.projectRoot()
	if err != nil {
		return err
	}
	rep, err := routine.SyncProject(root)
	if err != nil {
		return fmt.Errorf("routine discovery: %w", err)
	}
	printSync(g.stderr, rep, "decree: routine-sync: ")
	return nil
}
