package cli

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"

	decreev1 "github.com/decreehq/decree/proto/decree/v1"
	"github.com/spf13/cobra"
)

// withSession wraps a command body that needs a controller.
func withSession(g *globals, fn func(cmd *cobra.Command, s *session, args []string) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		s, err := g.connect(cmd.Context())
		if err != nil {
			return err
		}
		defer s.close()
		return fn(cmd, s, args)
	}
}

func newStatusCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "status",
		Short: "Summarise the project: inbox, running message, migrations, workers",
		Args:  cobra.NoArgs,
		RunE: withSession(g, func(cmd *cobra.Command, s *session, _ []string) error {
			st, err := s.client.GetStatus(cmd.Context(), &decreev1.GetStatusRequest{})
			if err != nil {
				return describe(err)
			}
			dead, err := s.client.GetDeadLetterStats(cmd.Context(), &decreev1.GetDeadLetterStatsRequest{})
			if err != nil {
				return describe(err)
			}
			if g.output == "json" {
				return g.printJSONWith(st, map[string]proto.Message{"deadLetters": dead})
			}
			running := "-"
			if r := st.GetRunning(); r != nil {
				running = fmt.Sprintf("%s (%s, attempt %d)", r.GetId(), r.GetRoutine(), r.GetAttempts())
				if r.GetRoutine() == "" { // an older controller, or the routine is still being chosen
					running = fmt.Sprintf("%s (attempt %d)", r.GetId(), r.GetAttempts())
				}
				if u := st.GetRunningUsage(); u != nil && u.GetCalls() > 0 {
					running += ", " + costText(u, 0) + " so far"
				}
			}
			fmt.Fprintf(g.stdout, "project     %s\n", st.GetProjectDir())
			fmt.Fprintf(g.stdout, "running     %s\n", running)
			fmt.Fprintf(g.stdout, "inbox       %d queued, %d done, %d dead\n", st.GetQueued(), st.GetDone(), st.GetDead())
			if n := st.GetWaits(); n > 0 {
				fmt.Fprintf(g.stdout, "waits       %d waiting for a reply (decreectl waits)\n", n)
			}
			fmt.Fprintf(g.stdout, "migrations  %d processed, %d pending\n", st.GetMigrationsProcessed(), st.GetMigrationsPending())
			fmt.Fprintf(g.stdout, "workers     %d connected\n", st.GetWorkersConnected())
			printLanes(g.stdout, st)
			fmt.Fprintf(g.stdout, "dead        %s\n", deadLetterLine(dead, time.Now()))
			printServeStatus(g.stdout, st, clock())
			for _, p := range st.GetProblems() {
				fmt.Fprintf(g.stdout, "problem     %s\n", p)
			}
			for _, m := range st.GetInterrupted() {
				fmt.Fprintf(g.stdout, "interrupted %s (%s, attempt %d): `decreectl process` runs the attempt again from where it started, `decreectl cancel %s` reverts and drops it\n",
					m.GetId(), m.GetName(), m.GetAttempts(), m.GetId())
			}
			return nil
		}),
	}
}

func newRunsCmd(g *globals) *cobra.Command {
	var chain string
	var limit int32
	cmd := &cobra.Command{
		Use:   "runs",
		Short: "List runs, newest first",
		Args:  cobra.NoArgs,
		RunE: withSession(g, func(cmd *cobra.Command, s *session, _ []string) error {
			resp, err := listRuns(cmd.Context(), s.client, chain, int(limit))
			if err != nil {
				return describe(err)
			}
			if g.output == "json" {
				return g.printJSON(resp)
			}
			w := g.table("ID", "ROUTINE", "OUTCOME", "ATTEMPTS", "EXIT", "STARTED", "DURATION", "MIGRATION", "COST")
			for _, r := range resp.GetRuns() {
				outcome := strings.ToLower(strings.TrimPrefix(r.GetOutcome().String(), "RUN_OUTCOME_"))
				row(w, r.GetMessageId(), r.GetRoutine(), outcome, fmt.Sprintf("%d/%d", r.GetAttempts(), r.GetMaxAttempts()),
					r.GetExitCode(), when(r.GetStartTime()), r.GetDuration().AsDuration().Round(1e6), orDash(r.GetMigration()), costText(r.GetUsage(), r.GetMaxCostUsd()))
			}
			return w.Flush()
		}),
	}
	cmd.Flags().StringVar(&chain, "chain", "", "only runs of this chain")
	cmd.Flags().Int32Var(&limit, "limit", 0, "at most this many runs")
	return cmd
}

func newLogsCmd(g *globals) *cobra.Command {
	var followFlag bool
	var attempt int32
	var streamName string
	cmd := &cobra.Command{
		Use:   "logs [-f] ID",
		Short: "Print a run's routine log (the latest attempt unless --attempt)",
		Args:  cobra.ExactArgs(1),
		RunE: withSession(g, func(cmd *cobra.Command, s *session, args []string) error {
			st, err := s.client.WatchLogs(cmd.Context(), &decreev1.WatchLogsRequest{
				MessageId: args[0], Attempt: attempt, Stream: streamName, Follow: followFlag,
			})
			if err != nil {
				return describe(err)
			}
			for {
				resp, err := st.Recv()
				if err == io.EOF {
					return nil
				}
				if err != nil {
					return describe(err)
				}
				g.stdout.Write(resp.GetChunk().GetData())
			}
		}),
	}
	cmd.Flags().BoolVarP(&followFlag, "follow", "f", false, "keep printing until the attempt ends")
	cmd.Flags().Int32Var(&attempt, "attempt", 0, "attempt number (default: the latest)")
	cmd.Flags().StringVar(&streamName, "stream", "", "log stream: routine (default), papermill, hook, router")
	return cmd
}

// artifactCmd prints one run-directory file.
func (g *globals) printArtifact(cmd *cobra.Command, s *session, id, name string) error {
	st, err := s.client.GetArtifact(cmd.Context(), &decreev1.GetArtifactRequest{MessageId: id, Name: name})
	if err != nil {
		return describe(err)
	}
	for {
		resp, err := st.Recv()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return describe(err)
		}
		g.stdout.Write(resp.GetData())
	}
}

func newDiffCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "diff ID",
		Short: "Print a run's changes.diff (what the message changed)",
		Args:  cobra.ExactArgs(1),
		RunE: withSession(g, func(cmd *cobra.Command, s *session, args []string) error {
			return g.printArtifact(cmd, s, args[0], "changes.diff")
		}),
	}
}

func newRevertCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "revert ID",
		Short: "Undo a completed message's changes (refuses if those files changed since)",
		Args:  cobra.ExactArgs(1),
		RunE: withSession(g, func(cmd *cobra.Command, s *session, args []string) error {
			resp, err := s.client.RevertMessage(cmd.Context(), &decreev1.RevertMessageRequest{Id: args[0]})
			if err != nil {
				return describe(err)
			}
			if g.output == "json" {
				return g.printJSON(resp)
			}
			fmt.Fprintf(g.stderr, "decree: reverted %s (%d path(s))\n", args[0], len(resp.GetPaths()))
			for _, p := range resp.GetPaths() {
				fmt.Fprintln(g.stdout, p)
			}
			return nil
		}),
	}
}

func newRequeueCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "requeue ID",
		Short: "Move a dead-lettered message back into the inbox",
		Args:  cobra.ExactArgs(1),
		RunE: withSession(g, func(cmd *cobra.Command, s *session, args []string) error {
			resp, err := s.client.RequeueMessage(cmd.Context(), &decreev1.RequeueMessageRequest{Id: args[0]})
			if err != nil {
				return describe(err)
			}
			if g.output == "json" {
				return g.printJSON(resp)
			}
			fmt.Fprintf(g.stderr, "decree: requeued %s; it runs with the next `decreectl process`, or now if a controller is serving\n", resp.GetMessage().GetId())
			return nil
		}),
	}
}

func newCancelCmd(g *globals) *cobra.Command {
	var reason string
	cmd := &cobra.Command{
		Use:   "cancel ID",
		Short: "Drop a queued, interrupted or running message: revert its changes and dead-letter it",
		Long: `cancel stops a running message, or drops a queued one. A message that
already ran part of an attempt (one interrupted by Ctrl-C) has its changes
reverted to the checkpoint taken before its first attempt. The message goes
to .decree/inbox/dead/ with reason Cancelled; requeue it to run it again.`,
		Args: cobra.ExactArgs(1),
		RunE: withSession(g, func(cmd *cobra.Command, s *session, args []string) error {
			resp, err := s.client.CancelMessage(cmd.Context(), &decreev1.CancelMessageRequest{Id: args[0], Reason: reason})
			if err != nil {
				return describe(err)
			}
			if g.output == "json" {
				return g.printJSON(resp)
			}
			fmt.Fprintf(g.stderr, "decree: cancelled %s; it is in .decree/inbox/dead/ (requeue it to run it again)\n", resp.GetMessage().GetId())
			return nil
		}),
	}
	cmd.Flags().StringVar(&reason, "reason", "", "why, written to the dead-letter note")
	return cmd
}

func newRoutinesCmd(g *globals) *cobra.Command {
	var all, check bool
	cmd := &cobra.Command{
		Use:   "routines",
		Short: "List routines with their descriptions and parameters",
		Args:  cobra.NoArgs,
		RunE: withSession(g, func(cmd *cobra.Command, s *session, _ []string) error {
			if check {
				return g.checkRoutines(cmd.Context(), s)
			}
			resp, err := s.client.ListRoutines(cmd.Context(), &decreev1.ListRoutinesRequest{All: all})
			if err != nil {
				return describe(err)
			}
			if g.output == "json" {
				return g.printJSON(resp)
			}
			w := g.table("NAME", "FORMAT", "DRIVER", "ENABLED", "PARAMETERS", "DESCRIPTION")
			for _, r := range resp.GetRoutines() {
				var params []string
				for _, p := range r.GetParameters() {
					switch {
					case p.GetStandard():
					case p.GetHasDefault():
						params = append(params, p.GetName()+"="+p.GetDefaultValue())
					default: // declared with a default the routine computes
						params = append(params, p.GetName()+"=(computed)")
					}
				}
				desc, _, _ := strings.Cut(r.GetDescription(), "\n")
				// A notebook's description is markdown: drop a heading's #s.
				desc = strings.TrimSpace(strings.TrimLeft(desc, "#"))
				if p := r.GetProblem(); p != "" {
					// The problem without its remedy (-o json has both).
					p, _, _ = strings.Cut(p, "\n")
					p, _, _ = strings.Cut(p, "; ")
					desc = "CANNOT RUN: " + p
				}
				format := strings.ToLower(strings.TrimPrefix(r.GetFormat().String(), "ROUTINE_FORMAT_"))
				if r.GetShared() {
					format += " (shared)"
				}
				row(w, r.GetName(), format, orDash(r.GetDriver()), r.GetEnabled(), orDash(strings.Join(params, " ")), desc)
			}
			return w.Flush()
		}),
	}
	cmd.Flags().BoolVar(&all, "all", false, "include disabled and deprecated routines")
	cmd.Flags().BoolVar(&check, "check", false, "run every enabled routine's pre-check on a worker (DECREE_PRE_CHECK=true); exit 3 when one fails")
	return cmd
}

func newWorkersCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "workers",
		Short: "List workers, their drivers, labels, current work and last heartbeat",
		Args:  cobra.NoArgs,
		RunE: withSession(g, func(cmd *cobra.Command, s *session, _ []string) error {
			resp, err := s.client.ListWorkers(cmd.Context(), &decreev1.ListWorkersRequest{})
			if err != nil {
				return describe(err)
			}
			if g.output == "json" {
				return g.printJSON(resp)
			}
			w := g.table("ID", "CONNECTED", "DRIVERS", "LABELS", "WORKING ON", "LAST HEARTBEAT", "WORKSPACE")
			for _, wk := range resp.GetWorkers() {
				var labels []string
				for k, v := range wk.GetLabels() {
					labels = append(labels, k+"="+v)
				}
				sort.Strings(labels)
				row(w, wk.GetId(), wk.GetConnected(), strings.Join(wk.GetDrivers(), ","), orDash(strings.Join(labels, ",")),
					orDash(wk.GetCurrentMessageId()), when(wk.GetLastHeartbeat()), wk.GetHostname()+":"+wk.GetWorkspace())
			}
			return w.Flush()
		}),
	}
}

// printLanes shows the parallel lanes and the merge queue.
func printLanes(w io.Writer, st *decreev1.GetStatusResponse) {
	defer printConflicts(w, st)
	if len(st.GetLanes()) == 0 && st.GetMerges() == 0 {
		return
	}
	fmt.Fprintf(w, "lanes       %d open, %d merge(s) applied\n", len(st.GetLanes()), st.GetMerges())
	for _, l := range st.GetLanes() {
		worker := orDash(l.GetWorkerId())
		retry := ""
		if l.GetRetryOf() != "" {
			retry = ", runs chain " + l.GetRetryOf() + " again after a merge conflict"
		}
		if l.GetState() == decreev1.LaneState_LANE_STATE_MERGING {
			fmt.Fprintf(w, "  lane %s  merge queue #%d (worker %s)%s\n", l.GetChain(), l.GetMergePosition(), worker, retry)
			continue
		}
		what := "between messages"
		if l.GetMessageId() != "" {
			what = fmt.Sprintf("%s attempt %d", l.GetMessageId(), l.GetAttempt())
		}
		fmt.Fprintf(w, "  lane %s  worker %s  %s%s\n", l.GetChain(), worker, what, retry)
	}
}

// printConflicts shows the latest merge conflicts.
func printConflicts(w io.Writer, st *decreev1.GetStatusResponse) {
	for _, c := range st.GetMergeConflicts() {
		then := "its first message was dead-lettered"
		if c.GetRequeuedAs() != "" {
			then = "requeued as chain " + c.GetRequeuedAs()
		}
		fmt.Fprintf(w, "conflict    chain %s: %s; %s\n", c.GetChain(), strings.Join(c.GetConflicts(), "; "), then)
	}
}
