package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/decreehq/decree/controller/store"
	"github.com/decreehq/decree/pkg/message"
	"github.com/decreehq/decree/pkg/usage"
	decreev1 "github.com/decreehq/decree/proto/decree/v1"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// usageFixtures are pkg/usage's examples of each CLI's JSON output.
const usageFixtures = "../../../pkg/usage/testdata"

// TestUsageRecord pipes each CLI's JSON output through `usage record`:
// lines land in $DECREE_USAGE_FILE (or --file), --tee passes the output
// on, and output without usage (a usage-limit stop) records nothing,
// warns, and still exits 0.
func TestUsageRecord(t *testing.T) {
	file := filepath.Join(t.TempDir(), "usage.try-001.jsonl")
	t.Setenv("DECREE_USAGE_FILE", file)
	run := func(stdin string, args ...string) ctlResult {
		var out, errb bytes.Buffer
		code := Main(context.Background(), append([]string{"usage", "record"}, args...), strings.NewReader(stdin), &out, &errb)
		return ctlResult{code, out.String(), errb.String()}
	}
	claude, _ := os.ReadFile(filepath.Join(usageFixtures, "claude-result.json"))
	r := run(string(claude), "--from", "claude-json", "--tee").must(t, 0)
	if r.stdout != string(claude) {
		t.Errorf("--tee did not pass the output on: %q", r.stdout)
	}
	run("", "--from", "codex-json", "--model", "gpt-5-codex", filepath.Join(usageFixtures, "codex-exec.jsonl")).must(t, 0)
	run("", "--from", "gemini-json", filepath.Join(usageFixtures, "gemini.json")).must(t, 0)
	r = run("Claude AI usage limit reached|1764111600\n", "--from", "claude-json", "-").must(t, 0)
	if !strings.Contains(r.stderr, "claude printed no result with usage") {
		t.Errorf("usage-limit stop: %q", r.stderr)
	}
	recs, bad, _, err := usage.ReadFile(file)
	if err != nil || bad != 0 {
		t.Fatal(bad, err)
	}
	var tools []string
	for _, rec := range recs {
		tools = append(tools, rec.Tool+"/"+rec.Model)
	}
	want := "claude/claude-sonnet-4-5-20250929 codex/gpt-5-codex codex/gpt-5-codex gemini/gemini-2.5-flash gemini/gemini-2.5-pro"
	if strings.Join(tools, " ") != want {
		t.Errorf("recorded %v, want %s", tools, want)
	}
	total := usage.NewSum(usage.DefaultPrices()).Lines(recs, 0)
	if total.CostUSD != 123400+29670+9543 {
		t.Errorf("total %s (%d µ$)", total.CostUSD, total.CostUSD)
	}
	other := filepath.Join(t.TempDir(), "other.jsonl")
	run(string(claude), "--from", "claude-json", "--file", other).must(t, 0)
	if b, _ := os.ReadFile(other); !strings.Contains(string(b), `"cost_usd":0.1234`) {
		t.Errorf("--file: %s", b)
	}
	r = run("", "--from", "cursor-json").must(t, 2)
	if !strings.Contains(r.stderr, "claude-json, codex-json, gemini-json") {
		t.Errorf("bad format: %q", r.stderr)
	}
	r = run("", "--from", "claude-json", filepath.Join(t.TempDir(), "missing.json")).must(t, 0)
	if !strings.Contains(r.stderr, "nothing recorded") {
		t.Errorf("missing file: %q", r.stderr)
	}
}

// costProject is a project with finished runs on two days, of two
// routines and chains, with and without usage.
func costProject(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, ".decree"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, ".decree", "config.yml"), []byte("time_zone: UTC\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 11, 20, 23, 0, 0, 0, time.UTC)
	st, err := store.Open(dir, store.Options{Location: time.UTC, Now: func() time.Time { now = now.Add(10 * time.Minute); return now }})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	c := func(cost, est float64, in, out, cr, cw int64) usage.Totals {
		return usage.Totals{CostUSD: usage.FromFloat(cost), EstimatedUSD: usage.FromFloat(est), InputTokens: in, OutputTokens: out, CacheReadTokens: cr, CacheWriteTokens: cw, Calls: 1}
	}
	for _, r := range []struct {
		routine  string
		attempts []usage.Totals
		outcome  string
	}{
		{"develop", []usage.Totals{c(0.1234, 0, 24, 2210, 90211, 8120), c(0.0766, 0, 16, 1190, 59789, 880)}, store.OutcomeSucceeded},
		{"develop", []usage.Totals{c(0.4, 0, 100, 1000, 0, 0), c(0.4, 0, 100, 1000, 0, 0), c(0.45, 0, 100, 1000, 0, 0)}, store.OutcomeDeadLettered},
		{"review", []usage.Totals{c(0.039213, 0.039213, 15001, 4796, 45711, 0)}, store.OutcomeSucceeded},
		{"review", nil, store.OutcomeSucceeded},
	} {
		e, err := st.CreateMessage("m", &message.Message{Body: []byte("x\n")})
		if err != nil {
			t.Fatal(err)
		}
		run, err := st.StartRun(store.RunStart{Entry: e, Routine: r.routine, MaxAttempts: 3})
		if err != nil {
			t.Fatal(err)
		}
		var total usage.Totals
		n := max(len(r.attempts), 1)
		for i := 0; i < n; i++ {
			if _, err := run.BeginAttempt(); err != nil {
				t.Fatal(err)
			}
			if err := run.FinishAttempt(i+1, 0, ""); err != nil {
				t.Fatal(err)
			}
		}
		for _, a := range r.attempts {
			total.Add(a)
		}
		if len(r.attempts) > 0 {
			if err := run.SetUsage(r.attempts, total, 1); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := run.Finish(r.outcome); err != nil {
			t.Fatal(err)
		}
		if _, err := st.MarkDone(e.File); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestCostGolden prints the cost table of a project by routine, chain
// and day, and as JSON.
func TestCostGolden(t *testing.T) {
	dir := costProject(t)
	for _, tc := range []struct{ golden, args string }{
		{"cost-by-routine.golden", "cost"},
		{"cost-by-chain.golden", "cost --by chain"},
		{"cost-by-day.golden", "cost --by day"},
		{"cost-since.golden", "cost --by day --since 2026-11-21"},
		{"cost.json.golden", "-o json cost --by routine"},
	} {
		r := ctl(t, append([]string{"-C", dir}, strings.Fields(tc.args)...)...).must(t, 0)
		golden(t, tc.golden, r.stdout)
	}
	r := ctl(t, "-C", dir, "cost", "--by", "model").must(t, 2)
	if !strings.Contains(r.stderr, "choose routine, chain or day") {
		t.Errorf("--by model: %q", r.stderr)
	}
	r = ctl(t, "-C", dir, "cost", "--since", "last week").must(t, 2)
	if !strings.Contains(r.stderr, "give a date such as 2026-11-01 or a duration") {
		t.Errorf("--since: %q", r.stderr)
	}
	r = ctl(t, "-C", dir, "runs").must(t, 0)
	if !strings.Contains(r.stdout, "COST") || !strings.Contains(r.stdout, "$0.2000 of $1.0000") {
		t.Errorf("runs:\n%s", r.stdout)
	}
}

// TestParseSince reads dates and durations back from now.
func TestParseSince(t *testing.T) {
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	run := func(start string) *decreev1.RunInfo {
		ts, _ := time.Parse(time.RFC3339, start)
		return &decreev1.RunInfo{StartTime: timestamppb.New(ts), TimeZone: "Europe/Berlin"}
	}
	for _, tc := range []struct {
		since, start string
		want         bool
	}{
		{"", "2020-01-01T00:00:00Z", true},
		{"2026-11-25", "2026-11-24T23:30:00Z", true}, // 00:30 on the 25th in Berlin
		{"2026-11-25", "2026-11-24T22:30:00Z", false},
		{"36h", "2026-11-24T00:00:00Z", true},
		{"36h", "2026-11-23T23:59:00Z", false},
		{"7d", "2026-11-18T12:00:00Z", true},
		{"7d", "2026-11-18T11:00:00Z", false},
	} {
		s, err := parseSince(tc.since, now)
		if err != nil {
			t.Fatal(err)
		}
		if got := s.admits(run(tc.start)); got != tc.want {
			t.Errorf("since %q admits %s: %v", tc.since, tc.start, got)
		}
	}
}
