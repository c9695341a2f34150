package cli

import (
	"fmt"

	decreev1 "github.com/decreehq/decree/proto/decree/v1"
	"github.com/spf13/cobra"
)

func newProcessCmd(g *globals) *cobra.Command {
	var dryRun, quiet bool
	cmd := &cobra.Command{
		Use:   "process",
		Short: "Process every unprocessed migration in order, each as its own chain",
		Long: `process first runs the messages already queued in the inbox (a requeued
dead letter, a file dropped in by hand), then the spec files of the
migrations directory that processed.md does not list yet, in file-name order. Each becomes a spec message with its
own chain; its follow-ups run depth-first before the next migration starts.
When a migration dead-letters, process stops and exits 1
(on_migration_failure: stop, the default) or goes on to the next one
(on_migration_failure: continue, and still exits 1 at the end).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			g.process = !dryRun
			if !dryRun {
				if err := g.syncAtStart(); err != nil {
					return err
				}
			}
			s, err := g.connect(ctx)
			if err != nil {
				return err
			}
			defer s.close()
			resp, err := s.client.ProcessMigrations(ctx, &decreev1.ProcessMigrationsRequest{DryRun: dryRun})
			if err != nil {
				return describe(err)
			}
			if dryRun {
				return g.dryRunProcess(ctx, s, resp)
			}
			pending := 0
			for _, m := range resp.GetMigrations() {
				if !m.GetProcessed() {
					pending++
				}
			}
			if dryRun || g.output == "json" {
				if g.output == "json" {
					return g.printJSON(resp)
				}
				for _, m := range resp.GetMigrations() {
					state := "pending"
					if m.GetProcessed() {
						state = "processed"
					}
					fmt.Fprintf(g.stdout, "%-10s %s\n", state, m.GetFile())
				}
				return nil
			}
			if resp.GetJobId() == "" {
				fmt.Fprintln(g.stderr, "decree: every migration is processed and the inbox is empty; nothing to do")
				return nil
			}
			fmt.Fprintf(g.stderr, "decree: processing the queued messages and %d migration(s)\n", pending)
			res, err := g.follow(ctx, s.client, followSpec{
				from: resp.GetEventSequence(), job: resp.GetJobId(), logs: !quiet,
				done: func(ev *decreev1.Event) bool {
					return ev.GetKind() == decreev1.EventKind_EVENT_KIND_PROCESS_FINISHED && ev.GetJobId() == resp.GetJobId()
				},
			})
			if err != nil {
				if ctx.Err() != nil {
					return g.interrupted(s, "")
				}
				return err
			}
			waiting := g.printPendingWaits(ctx, s.client)
			if res.last.GetExitCode() == exitWaiting && waiting {
				return &exitError{code: exitWaiting, msg: res.last.GetText()}
			}
			if res.last.GetExitCode() != 0 {
				return &exitError{code: 1, msg: res.last.GetText()}
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "list the pending migrations with their routine and its pre-check (PASS / FAIL: reason; exit 3 when one fails); change nothing")
	cmd.Flags().BoolVarP(&quiet, "quiet", "q", false, "do not stream routine output")
	return cmd
}
