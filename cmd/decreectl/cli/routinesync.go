package cli

import (
	"fmt"

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
			for _, n := range rep.GetAdded() {
				fmt.Fprintf(g.stdout, "added       %s (enabled)\n", n)
			}
			for _, n := range rep.GetAddedShared() {
				fmt.Fprintf(g.stdout, "added       shared:%s (disabled; enable it in config.yml)\n", n)
			}
			for _, n := range rep.GetDeprecated() {
				fmt.Fprintf(g.stdout, "deprecated  %s (its file is gone)\n", n)
			}
			for _, n := range rep.GetRestored() {
				fmt.Fprintf(g.stdout, "restored    %s\n", n)
			}
			if len(rep.GetAdded())+len(rep.GetAddedShared())+len(rep.GetDeprecated())+len(rep.GetRestored()) == 0 {
				fmt.Fprintln(g.stderr, "decree: the registry is up to date")
			}
			return nil
		}),
	}
}
