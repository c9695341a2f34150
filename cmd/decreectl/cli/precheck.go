package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	decreev1 "github.com/decreehq/decree/proto/decree/v1"
)

// exitNotReady is the exit status of `process --dry-run` and
// `routines --check` when a pre-check fails.
const exitNotReady = 3

// dryRunProcess prints each pending migration with the routine it would
// run and that routine's pre-check result (run on a worker), and fails
// with exit 3 when any pre-check fails.
func (g *globals) dryRunProcess(ctx context.Context, s *session, migs *decreev1.ProcessMigrationsResponse) error {
	resp, err := s.client.CheckRoutines(ctx, &decreev1.CheckRoutinesRequest{PendingMigrations: true})
	if err != nil {
		return describe(err)
	}
	if g.output == "json" {
		if err := g.printJSONWith(migs, map[string]proto.Message{"preChecks": resp}); err != nil {
			return err
		}
		return notReady(resp)
	}
	processed := len(migs.GetMigrations()) - len(resp.GetResults())
	if len(resp.GetResults()) == 0 {
		fmt.Fprintf(g.stderr, "decree: no pending migration (%d processed)\n", processed)
		return nil
	}
	queued := map[string]string{}
	for _, m := range migs.GetMigrations() {
		if id := m.GetQueuedMessageId(); id != "" {
			queued[m.GetFile()] = id
		}
	}
	w := g.table("MIGRATION", "ROUTINE", "PRE-CHECK")
	for _, r := range resp.GetResults() {
		name := r.GetMigration()
		if id := queued[name]; id != "" {
			// Not started afresh: its message in the inbox resumes.
			name += " (queued as " + id + ", resumes)"
		}
		row(w, name, r.GetRoutine(), preCheckText(r))
	}
	if err := w.Flush(); err != nil {
		return err
	}
	if processed > 0 {
		fmt.Fprintf(g.stderr, "decree: %d migration(s) already processed are not listed\n", processed)
	}
	return notReady(resp)
}

// checkRoutines runs the pre-check of every enabled routine.
func (g *globals) checkRoutines(ctx context.Context, s *session) error {
	resp, err := s.client.CheckRoutines(ctx, &decreev1.CheckRoutinesRequest{AllEnabled: true})
	if err != nil {
		return describe(err)
	}
	if g.output == "json" {
		if err := g.printJSON(resp); err != nil {
			return err
		}
		return notReady(resp)
	}
	w := g.table("ROUTINE", "PRE-CHECK")
	for _, r := range resp.GetResults() {
		row(w, r.GetRoutine(), preCheckText(r))
	}
	if err := w.Flush(); err != nil {
		return err
	}
	return notReady(resp)
}

// preCheckText is PASS, PASS (no pre-check) or FAIL: reason.
func preCheckText(r *decreev1.PreCheckResult) string {
	switch {
	case r.GetNoPreCheck():
		return "PASS (no pre-check)"
	case r.GetReady():
		return "PASS"
	}
	return "FAIL: " + r.GetReason()
}

// notReady is the exit error when any pre-check failed.
func notReady(resp *decreev1.CheckRoutinesResponse) error {
	failed := 0
	for _, r := range resp.GetResults() {
		if !r.GetReady() {
			failed++
		}
	}
	if failed == 0 {
		return nil
	}
	return &exitError{code: exitNotReady, msg: fmt.Sprintf("%d pre-check(s) failed; fix what they report, then run again", failed)}
}

// deadLetterLine is status's summary of inbox/dead/.
func deadLetterLine(st *decreev1.GetDeadLetterStatsResponse, now time.Time) string {
	if st.GetCount() == 0 {
		return "none"
	}
	line := fmt.Sprintf("%d", st.GetCount())
	if t := st.GetOldestTime(); t != nil {
		line += ", oldest " + age(now.Sub(t.AsTime())) + " old"
	}
	return line
}

// age renders a duration for people: 45s, 12m, 3h20m, 2d4h.
func age(d time.Duration) string {
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", max(int(d.Seconds()), 0))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 24*time.Hour:
		return pair(int(d.Hours()), "h", int(d.Minutes())%60, "m")
	}
	return pair(int(d.Hours())/24, "d", int(d.Hours())%24, "h")
}

// pair renders "3h20m", or "3h" when the second part is zero.
func pair(a int, au string, b int, bu string) string {
	if b == 0 {
		return fmt.Sprintf("%d%s", a, au)
	}
	return fmt.Sprintf("%d%s%d%s", a, au, b, bu)
}

// printJSONWith prints base as a JSON object (protojson field names) with
// the extra responses added under their keys.
func (g *globals) printJSONWith(base proto.Message, extra map[string]proto.Message) error {
	b, err := protojson.Marshal(base)
	if err != nil {
		return err
	}
	obj := map[string]json.RawMessage{}
	if err := json.Unmarshal(b, &obj); err != nil {
		return err
	}
	for k, m := range extra {
		b, err := protojson.Marshal(m)
		if err != nil {
			return err
		}
		obj[k] = b
	}
	b, err = json.MarshalIndent(obj, "", "  ")
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(g.stdout, string(b))
	return err
}
