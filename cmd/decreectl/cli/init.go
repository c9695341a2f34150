package cli

import (
	"fmt"

	"github.com/decreehq/decree/pkg/scaffold"
	"github.com/spf13/cobra"
)

func newInitCmd(g *globals) *cobra.Command {
	var tool string
	cmd := &cobra.Command{
		Use:   "init",
		Short: "Create .decree/ in the project directory (never overwrites existing files)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			dir := g.project
			if dir == "" {
				dir = "."
			}
			rep, err := scaffold.Init(dir, scaffold.Options{Tool: tool})
			if err != nil {
				return err
			}
			for _, f := range rep.Created {
				fmt.Fprintln(g.stdout, "created", f)
			}
			for _, f := range rep.Updated {
				fmt.Fprintln(g.stdout, "updated", f)
			}
			for _, f := range rep.Kept {
				fmt.Fprintln(g.stdout, "kept   ", f)
			}
			if rep.Tool == "" {
				fmt.Fprintln(g.stderr, "decree: no AI tool (claude, opencode, copilot) on PATH; edit ai() in .decree/routines/*.sh to call yours")
			} else {
				fmt.Fprintf(g.stderr, "decree: routines call %s\n", rep.Tool)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&tool, "ai", "", "AI tool the routines call: claude, opencode or copilot (default: the first on PATH)")
	return cmd
}
