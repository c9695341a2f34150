package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	decreev1 "github.com/decreehq/decree/proto/decree/v1"
	"github.com/spf13/cobra"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// clock is the time `cron list` measures "ago" and countdowns from.
var clock = time.Now

func newCronCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "cron",
		Short: "Inspect the scheduled messages of .decree/cron/",
		Args:  cobra.NoArgs,
	}
	cmd.AddCommand(&cobra.Command{
		Use:   "list",
		Short: "List cron files with their schedule, routine, last run and next fire",
		Long: `list shows every file of .decree/cron/: its schedule, the routine it runs
(its routine: field, else default_routine), how long ago it last fired and
the countdown to its next fire. A file that cannot be scheduled is listed
with the reason. With -o json the times are absolute (RFC 3339 in the
schedule's zone) and each entry names its zone.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			s, err := g.connect(ctx)
			if err != nil {
				return err
			}
			defer s.close()
			resp, err := s.client.ListCronEntries(ctx, &decreev1.ListCronEntriesRequest{})
			if err != nil {
				return describe(err)
			}
			if g.output == "json" {
				return printCronJSON(g.stdout, resp)
			}
			printCronTable(g.stdout, resp, clock())
			return nil
		},
	})
	return cmd
}

// printCronTable writes the FILE SCHEDULE ROUTINE LAST RUN NEXT table, and
// below it why broken files are ignored.
func printCronTable(w io.Writer, resp *decreev1.ListCronEntriesResponse, now time.Time) {
	if len(resp.GetEntries()) == 0 {
		fmt.Fprintln(w, "No cron files.")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "FILE\tSCHEDULE\tROUTINE\tLAST RUN\tNEXT")
	var broken []string
	for _, e := range resp.GetEntries() {
		last := "never"
		if e.GetLastRun() != nil {
			last = span(now.Sub(e.GetLastRun().AsTime())) + " ago"
		}
		next := "-"
		switch {
		case e.GetError() != "":
			next = "invalid"
			broken = append(broken, e.GetError())
		case e.GetNextRun() != nil:
			next = span(e.GetNextRun().AsTime().Sub(now))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", e.GetFile(), orDash(e.GetSchedule()), e.GetRoutine(), last, next)
	}
	tw.Flush()
	if len(broken) > 0 {
		fmt.Fprintln(w)
		for _, b := range broken {
			fmt.Fprintln(w, "ignored: "+b)
		}
	}
}

// span writes a duration the way people read a schedule: "now", "45s",
// "13m", "2h5m" (under ten hours), "23h", "3d4h".
func span(d time.Duration) string {
	two := func(a int, ua string, b int, ub string) string {
		if b == 0 {
			return fmt.Sprintf("%d%s", a, ua)
		}
		return fmt.Sprintf("%d%s%d%s", a, ua, b, ub)
	}
	switch {
	case d < time.Second:
		return "now"
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d/time.Second))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d/time.Minute))
	case d < 10*time.Hour:
		return two(int(d/time.Hour), "h", int(d%time.Hour/time.Minute), "m")
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d/time.Hour))
	default:
		return two(int(d/(24*time.Hour)), "d", int(d%(24*time.Hour)/time.Hour), "h")
	}
}

// cronJSON is one entry of `cron list -o json`.
type cronJSON struct {
	File     string  `json:"file"`
	Schedule string  `json:"schedule"`
	Routine  string  `json:"routine"`
	TimeZone string  `json:"time_zone"`
	CatchUp  bool    `json:"catch_up"`
	LastRun  *string `json:"last_run"`
	NextRun  *string `json:"next_run"`
	Error    string  `json:"error,omitempty"`
}

// printCronJSON writes the entries with absolute times in their zone.
func printCronJSON(w io.Writer, resp *decreev1.ListCronEntriesResponse) error {
	out := make([]cronJSON, 0, len(resp.GetEntries()))
	for _, e := range resp.GetEntries() {
		loc, err := time.LoadLocation(e.GetTimeZone())
		if err != nil {
			loc = time.UTC
		}
		out = append(out, cronJSON{
			File: e.GetFile(), Schedule: e.GetSchedule(), Routine: e.GetRoutine(), TimeZone: e.GetTimeZone(),
			CatchUp: e.GetCatchUp(), LastRun: absolute(e.GetLastRun(), loc), NextRun: absolute(e.GetNextRun(), loc), Error: e.GetError(),
		})
	}
	b, err := json.MarshalIndent(out, "", "  ")
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(w, string(b))
	return err
}

// absolute is RFC 3339 in loc, nil (JSON null) when unset.
func absolute(ts *timestamppb.Timestamp, loc *time.Location) *string {
	if ts == nil {
		return nil
	}
	s := ts.AsTime().In(loc).Format(time.RFC3339)
	return &s
}
