package cli

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/decreehq/decree/pkg/usage"
	decreev1 "github.com/decreehq/decree/proto/decree/v1"
	"github.com/spf13/cobra"
)

// costRow is one group of `decreectl cost`.
type costRow struct {
	Key      string       `json:"key"`
	Runs     int          `json:"runs"`
	Attempts int          `json:"attempts"`
	Usage    usage.Totals `json:"usage"`
}

func (r *costRow) add(runs, attempts int, u usage.Totals) {
	r.Runs += runs
	r.Attempts += attempts
	r.Usage.Add(u)
}

// totalsOf converts the API's Usage (nil: nothing recorded).
func totalsOf(u *decreev1.Usage) usage.Totals {
	if u == nil {
		return usage.Totals{}
	}
	return usage.Totals{
		CostUSD: usage.FromFloat(u.GetCostUsd()), EstimatedUSD: usage.FromFloat(u.GetEstimatedCostUsd()),
		InputTokens: u.GetInputTokens(), OutputTokens: u.GetOutputTokens(),
		CacheReadTokens: u.GetCacheReadTokens(), CacheWriteTokens: u.GetCacheWriteTokens(),
		Calls: int(u.GetCalls()), Unpriced: int(u.GetUnpricedCalls()), Malformed: int(u.GetMalformedLines()),
	}
}

func newCostCmd(g *globals) *cobra.Command {
	var since, by string
	cmd := &cobra.Command{
		Use:   "cost [--since DATE|DURATION] [--by routine|chain|day]",
		Short: "What finished runs cost, by routine, chain or day",
		Long: `cost sums the usage recorded in run.json of finished runs (see
DECREE_USAGE_FILE in the README) and prints one row per routine (the default),
chain or day, oldest day first, with a total. --since takes a date
(2026-11-01, the day's start in the run's time zone) or a duration back from
now (36h, 7d). COST includes what was estimated from the price table
(ESTIMATED); calls whose model has no price are counted in -o json as
unpriced_calls.`,
		Args: cobra.NoArgs,
		RunE: withSession(g, func(cmd *cobra.Command, s *session, _ []string) error {
			if by != "routine" && by != "chain" && by != "day" {
				return &exitError{code: 2, msg: fmt.Sprintf("cost --by %q: choose routine, chain or day", by)}
			}
			from, err := parseSince(since, clock())
			if err != nil {
				return &exitError{code: 2, msg: err.Error()}
			}
			resp, err := listRuns(cmd.Context(), s.client, "", 0)
			if err != nil {
				return describe(err)
			}
			rows := costRows(resp.GetRuns(), by, from)
			return printCost(g, rows, by)
		}),
	}
	cmd.Flags().StringVar(&since, "since", "", "only runs started from this date (YYYY-MM-DD) or this long ago (36h, 7d)")
	cmd.Flags().StringVar(&by, "by", "routine", "group by routine, chain or day")
	return cmd
}

// since is a lower bound on a run's start: an instant, or a date whose
// start is taken in each run's own time zone.
type since struct {
	at   time.Time
	date string // YYYY-MM-DD
}

func parseSince(s string, now time.Time) (since, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return since{}, nil
	}
	if _, err := time.Parse(time.DateOnly, s); err == nil {
		return since{date: s}, nil
	}
	if n, ok := strings.CutSuffix(s, "d"); ok {
		if d, err := strconv.Atoi(n); err == nil && d >= 0 {
			return since{at: now.Add(-time.Duration(d) * 24 * time.Hour)}, nil
		}
	}
	if d, err := time.ParseDuration(s); err == nil && d >= 0 {
		return since{at: now.Add(-d)}, nil
	}
	return since{}, fmt.Errorf("cost --since %q: give a date such as 2026-11-01 or a duration such as 36h or 7d", s)
}

// runDay is the day a run started, in its own time zone.
func runDay(r *decreev1.RunInfo) (time.Time, bool) {
	if r.GetStartTime() == nil {
		return time.Time{}, false
	}
	loc, err := time.LoadLocation(r.GetTimeZone())
	if err != nil || r.GetTimeZone() == "" {
		loc = time.Local
	}
	return r.GetStartTime().AsTime().In(loc), true
}

func (s since) admits(r *decreev1.RunInfo) bool {
	start, ok := runDay(r)
	switch {
	case s.date != "":
		return ok && start.Format(time.DateOnly) >= s.date
	case !s.at.IsZero():
		return ok && !start.Before(s.at)
	}
	return true
}

// costRows groups finished runs.
func costRows(runs []*decreev1.RunInfo, by string, from since) []*costRow {
	groups := map[string]*costRow{}
	for _, r := range runs {
		if r.GetOutcome() == decreev1.RunOutcome_RUN_OUTCOME_RUNNING || !from.admits(r) {
			continue
		}
		key := r.GetRoutine()
		switch by {
		case "chain":
			key, _, _ = strings.Cut(r.GetMessageId(), "-")
		case "day":
			key = "-"
			if t, ok := runDay(r); ok {
				key = t.Format(time.DateOnly)
			}
		}
		if key == "" {
			key = "-"
		}
		if groups[key] == nil {
			groups[key] = &costRow{Key: key}
		}
		groups[key].add(1, int(r.GetAttempts()), totalsOf(r.GetUsage()))
	}
	rows := make([]*costRow, 0, len(groups))
	for _, r := range groups {
		rows = append(rows, r)
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].Key < rows[j].Key })
	return rows
}

func printCost(g *globals, rows []*costRow, by string) error {
	total := &costRow{Key: "total"}
	for _, r := range rows {
		total.add(r.Runs, r.Attempts, r.Usage)
	}
	if g.output == "json" {
		b, err := json.MarshalIndent(map[string]any{"by": by, "rows": rows, "total": total}, "", "  ")
		if err != nil {
			return err
		}
		_, err = fmt.Fprintln(g.stdout, string(b))
		return err
	}
	w := g.table(strings.ToUpper(by), "RUNS", "ATTEMPTS", "COST", "ESTIMATED", "INPUT", "OUTPUT", "CACHE READ", "CACHE WRITE")
	for _, r := range append(rows, total) {
		u := r.Usage
		row(w, r.Key, r.Runs, r.Attempts, u.CostUSD, u.EstimatedUSD, u.InputTokens, u.OutputTokens, u.CacheReadTokens, u.CacheWriteTokens)
	}
	return w.Flush()
}

// costText is a run's cost for tables: "$0.2892", "$0.2892 of $1.00" with
// a budget, "-" when nothing was recorded.
func costText(u *decreev1.Usage, budget float64) string {
	s := "-"
	if u != nil {
		s = usage.FromFloat(u.GetCostUsd()).String()
	}
	if budget > 0 {
		s += " of " + usage.FromFloat(budget).String()
	}
	return s
}
