package pipeline

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/decreehq/decree/controller/msgstate"
	"github.com/decreehq/decree/controller/store"
	"github.com/decreehq/decree/pkg/config"
	"github.com/decreehq/decree/pkg/message"
	"github.com/decreehq/decree/pkg/routine"
	"github.com/decreehq/decree/pkg/usage"
)

// usageFixture is a message whose attempts' usage files are the test's
// (lines per attempt), with a usage stage reading them.
type usageFixture struct {
	m     *msg
	stage *usageStage
	mu    sync.Mutex
	files map[int]string
	notes []string
}

func newUsageFixture(t *testing.T, cfgYAML, frontmatter string) *usageFixture {
	t.Helper()
	cfg, _, err := config.Parse("config.yml", []byte(cfgYAML))
	if err != nil {
		t.Fatal(err)
	}
	mm, err := message.Parse([]byte(frontmatter + "x\n"))
	if err != nil {
		t.Fatal(err)
	}
	e, run := checkpointedRun(t, "costly", mm, 3)
	f := &usageFixture{m: &msg{e: e, cfg: cfg, rt: routine.Routine{Name: "develop"}, run: run}, files: map[int]string{}}
	f.stage = &usageStage{
		read: func(_ *msg, n int) ([]usage.Record, int, []string, error) {
			f.mu.Lock()
			defer f.mu.Unlock()
			return usage.Read(strings.NewReader(f.files[n]))
		},
		note: func(_ *msg, n int, text string) { f.notes = append(f.notes, text) },
		save: func(m *msg, per []usage.Totals, total usage.Totals, budget float64) error {
			return m.run.SetUsage(per, total, budget)
		},
		warn:  func(context.Context, string, string) {},
		every: 5 * time.Millisecond,
	}
	return f
}

func (f *usageFixture) write(n int, lines string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.files[n] += lines
}

// checkpointedRun is a new message with a run whose checkpoint is taken
// (max attempts).
func checkpointedRun(t *testing.T, name string, mm *message.Message, max int) (store.Entry, *store.Run) {
	t.Helper()
	st, err := store.Open(t.TempDir(), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	e, err := st.CreateMessage(name, mm)
	if err != nil {
		t.Fatal(err)
	}
	run, err := st.StartRun(store.RunStart{Entry: e, Routine: "develop", MaxAttempts: max})
	if err != nil {
		t.Fatal(err)
	}
	for _, tr := range []func(msgstate.Msg) (msgstate.Msg, error){
		func(v msgstate.Msg) (msgstate.Msg, error) { return msgstate.Claim(v, max) },
		msgstate.Checkpoint,
	} {
		if _, err := run.Step(tr); err != nil {
			t.Fatal(err)
		}
	}
	return e, run
}

// attempt starts attempt n, lets the stage see its end, records the end.
func (f *usageFixture) attempt(t *testing.T, n int, ok bool) attemptEnd {
	t.Helper()
	if _, err := f.m.run.BeginAttemptStep(func(v msgstate.Msg) (msgstate.Msg, error) { return msgstate.Start(v, n) }); err != nil {
		t.Fatal(err)
	}
	end := attemptEnd{exitCode: 1}
	if ok {
		end.exitCode = 0
	}
	end.res.OK = ok
	f.stage.after(context.Background(), f.m, n, &end)
	if _, err := f.m.run.FinishAttemptStep(n, end.exitCode, end.errText, func(v msgstate.Msg) (msgstate.Msg, error) { return msgstate.End(v, n, end.res) }); err != nil {
		t.Fatal(err)
	}
	return end
}

const (
	claudeA = `{"tool":"claude","session_id":"s1","cost_usd":0.1234,"output_tokens":100,"cost_source":"reported"}` + "\n"
	claudeB = `{"tool":"claude","session_id":"s1","cost_usd":0.2,"output_tokens":300,"cost_source":"reported"}` + "\n"
)

// TestUsageStageTotals: the totals per attempt and in all reach
// state.json and run.json; Claude's running total restored by a retry
// counts once; a malformed line is noted in the attempt's log.
func TestUsageStageTotals(t *testing.T) {
	f := newUsageFixture(t, "", "")
	f.write(1, claudeA)
	f.attempt(t, 1, false)
	f.write(2, "not json\n"+claudeB)
	f.attempt(t, 2, true)
	st := f.m.run.State()
	if st.Usage == nil || st.Usage.CostUSD != 200000 || st.Usage.OutputTokens != 300 || st.Usage.Malformed != 1 {
		t.Fatalf("state usage %+v, want $0.20, 300 output tokens, 1 malformed", st.Usage)
	}
	if a := st.Attempts; a[0].Usage == nil || a[0].Usage.CostUSD != 123400 || a[1].Usage == nil || a[1].Usage.CostUSD != 76600 {
		t.Errorf("per attempt %+v %+v, want $0.1234 and $0.0766", a[0].Usage, a[1].Usage)
	}
	if len(f.notes) != 1 || !strings.Contains(f.notes[0], "usage line 1 skipped") {
		t.Errorf("notes %q", f.notes)
	}
	rec := f.m.run.Record()
	if rec.Usage == nil || rec.Usage.CostUSD != 200000 || rec.AttemptDetails[1].Usage.CostUSD != 76600 {
		t.Errorf("run.json usage %+v", rec.Usage)
	}
}

// TestUsageStageBudget: the lower of the message's and the routine's
// budget applies; each attempt gets what is left; an attempt ending over
// it fails over budget, even with exit code 0.
func TestUsageStageBudget(t *testing.T) {
	f := newUsageFixture(t, "routines:\n  develop:\n    max_cost_usd: 0.5\n", "---\nmax_cost_usd: 0.3\n---\n")
	env := map[string]string{}
	f.stage.env(f.m, 1, 3, env)
	if env["DECREE_BUDGET_USD"] != "0.3" || env["DECREE_USAGE_FILE"] != ".decree/runs/"+f.m.e.ID+"/usage.try-001.jsonl" || env["DECREE_FINAL_ATTEMPT"] != "false" {
		t.Fatalf("env %v", env)
	}
	f.write(1, claudeA)
	if end := f.attempt(t, 1, false); end.res.OverBudget {
		t.Fatal("$0.1234 of $0.30 is over budget")
	}
	f.stage.env(f.m, 2, 3, env)
	if env["DECREE_BUDGET_USD"] != "0.1766" {
		t.Errorf("budget left for attempt 2: %s, want 0.1766", env["DECREE_BUDGET_USD"])
	}
	f.write(2, `{"tool":"claude","session_id":"s2","cost_usd":0.25}`+"\n")
	end := f.attempt(t, 2, true)
	if !end.res.OverBudget || end.res.OK || !strings.Contains(end.errText, "over budget: the message's AI calls cost $0.3734, more than its max_cost_usd of $0.3000") {
		t.Fatalf("end %+v", end)
	}
	if v := f.m.run.Machine(); !v.OverBudget || msgstate.Next(v) != msgstate.StepBudget {
		t.Errorf("machine %+v plans %s", v, msgstate.Next(v))
	}
	if st := f.m.run.State(); st.MaxCostUSD != 0.3 || st.Attempts[1].Status != store.AttemptFailed {
		t.Errorf("state: budget %v, attempt 2 %s", st.MaxCostUSD, st.Attempts[1].Status)
	}
}

// TestUsageStageBadBudget: a message's unreadable max_cost_usd stops it
// before anything runs, saying what to fix.
func TestUsageStageBadBudget(t *testing.T) {
	f := newUsageFixture(t, "", "---\nmax_cost_usd: lots\n---\n")
	err := f.stage.before(context.Background(), f.m, 1)
	if err == nil || !strings.Contains(err.Error(), `max_cost_usd "lots"`) {
		t.Fatalf("before: %v", err)
	}
}

// TestUsageStageWatch: an in-place attempt is stopped once its message
// goes over budget while it runs; without a budget, or on a replica, the
// attempt is not watched.
func TestUsageStageWatch(t *testing.T) {
	f := newUsageFixture(t, "routines:\n  develop:\n    max_cost_usd: 1\n", "")
	ctx, over := f.stage.watch(context.Background(), f.m, 1, true)
	f.write(1, `{"tool":"claude","session_id":"s","cost_usd":0.6}`+"\n")
	select {
	case <-ctx.Done():
		t.Fatal("stopped under budget")
	case <-time.After(50 * time.Millisecond):
	}
	f.write(1, `{"tool":"claude","session_id":"s","cost_usd":1.4}`+"\n")
	select {
	case <-ctx.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("not stopped over budget")
	}
	if why := over(); !strings.Contains(why, "stopped over budget") || !strings.Contains(why, "$1.4000,") {
		t.Errorf("why %q", why)
	}
	for _, tc := range []struct {
		name    string
		cfg     string
		inPlace bool
	}{{"replica", "routines:\n  develop:\n    max_cost_usd: 1\n", false}, {"no budget", "", true}} {
		g := newUsageFixture(t, tc.cfg, "")
		parent := context.Background()
		ctx, over := g.stage.watch(parent, g.m, 1, tc.inPlace)
		if ctx != parent || over() != "" {
			t.Errorf("%s: watched", tc.name)
		}
	}
}

// TestAttemptValues: attempt N gets the Nth value, a retry after a usage
// limit the same value again, attempts beyond the list the last; the last
// attempt is marked final.
func TestAttemptValues(t *testing.T) {
	f := newUsageFixture(t, "routines:\n  develop:\n    attempts: [haiku, sonnet, opus]\n", "")
	if got := f.m.cfg.AttemptsFor("develop"); got != 3 {
		t.Fatalf("attempts %d", got)
	}
	for _, tc := range []struct {
		n, max, waits int
		value, final  string
	}{
		{1, 3, 0, "haiku", "false"},
		{2, 3, 0, "sonnet", "false"},
		{3, 3, 0, "opus", "true"},
		{2, 4, 1, "haiku", "false"}, // attempt 1 hit a usage limit
		{4, 4, 1, "opus", "true"},
		{5, 5, 0, "opus", "true"},
	} {
		if _, err := f.m.run.Step(func(v msgstate.Msg) (msgstate.Msg, error) { v.Waits = tc.waits; return v, nil }); err != nil {
			t.Fatal(err)
		}
		env := map[string]string{}
		f.stage.env(f.m, tc.n, tc.max, env)
		if env["DECREE_ATTEMPT_VALUE"] != tc.value || env["DECREE_FINAL_ATTEMPT"] != tc.final || env["DECREE_ATTEMPT_VALUES"] != "haiku,sonnet,opus" {
			t.Errorf("attempt %d of %d after %d waits: %v", tc.n, tc.max, tc.waits, env)
		}
	}
}
