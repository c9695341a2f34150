package pipeline

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/decreehq/decree/controller/msgstate"
	"github.com/decreehq/decree/pkg/config"
	"github.com/decreehq/decree/pkg/message"
)

// limitFixture is a message with a run whose attempt 1 is under way, and a
// usage-limit stage whose clock, sleep and log are the test's.
type limitFixture struct {
	m        *msg
	stage    *usageLimitStage
	log      string
	slept    []time.Duration
	restores int
	now      time.Time
}

func newLimitFixture(t *testing.T) *limitFixture {
	t.Helper()
	e, run := checkpointedRun(t, "limited", &message.Message{Body: []byte("x\n")}, 1)
	if _, err := run.BeginAttemptStep(func(v msgstate.Msg) (msgstate.Msg, error) { return msgstate.Start(v, 1) }); err != nil {
		t.Fatal(err)
	}
	f := &limitFixture{m: &msg{e: e, cfg: config.Default(), run: run}, now: time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)}
	f.stage = &usageLimitStage{
		readLog:  func(string, int) []byte { return []byte(f.log) },
		restore:  func(context.Context, *msg) error { f.restores++; return nil },
		announce: func(context.Context, *msg, msgstate.Limit, bool) {},
		loc:      func() *time.Location { return time.UTC },
		now:      func() time.Time { return f.now },
		sleep:    func(_ context.Context, d time.Duration) error { f.slept = append(f.slept, d); return nil },
		warn:     func(context.Context, string, string) {},
	}
	return f
}

// end runs the stage's after on a failed attempt 1 and records the end.
func (f *limitFixture) end(t *testing.T) attemptEnd {
	t.Helper()
	end := attemptEnd{exitCode: 1}
	f.stage.after(context.Background(), f.m, 1, &end)
	if _, err := f.m.run.FinishAttemptStep(1, 1, "", func(v msgstate.Msg) (msgstate.Msg, error) { return msgstate.End(v, 1, end.res) }); err != nil {
		t.Fatal(err)
	}
	return end
}

// TestUsageLimitStage: a limit is recorded with the attempt's end in one
// write (the attempt does not count), then waited out from the checkpoint
// before the next attempt, with the session id passed on.
func TestUsageLimitStage(t *testing.T) {
	f := newLimitFixture(t)
	f.log = "Session ID: sess-1\nClaude AI usage limit reached|" + itoa(f.now.Add(90*time.Minute).Unix()) + "\n"
	end := f.end(t)
	if end.res.Limit == nil {
		t.Fatal("the limit was not found in the log")
	}
	v := f.m.run.Machine()
	if v.Max != 2 || v.Waits != 1 || v.Limit == nil || v.Limit.SessionID != "sess-1" {
		t.Fatalf("recorded machine %+v: want max 2, one wait, the session id", v)
	}
	if st := f.m.run.State(); st.MaxAttempts != 2 {
		t.Errorf("state.json max_attempts = %d, want 2", st.MaxAttempts)
	}
	if err := f.stage.before(context.Background(), f.m, 2); err != nil {
		t.Fatal(err)
	}
	if f.restores != 1 || len(f.slept) != 1 || f.slept[0] != 90*time.Minute {
		t.Errorf("restores %d, slept %v; want one restore and a 90m wait", f.restores, f.slept)
	}
	env := map[string]string{}
	resumeEnv(v, 2, env)
	if env["DECREE_PREVIOUS_SESSION_ID"] != "sess-1" {
		t.Errorf("env = %v, want the previous session id", env)
	}
}

// TestUsageLimitWaitCapped: a reset far away (or a record made so) is
// waited at most usage_limit.max_wait.
func TestUsageLimitWaitCapped(t *testing.T) {
	f := newLimitFixture(t)
	f.m.cfg.UsageLimit.MaxWait = 2 * time.Hour
	f.log = "Claude AI usage limit reached|" + itoa(f.now.Add(30*24*time.Hour).Unix()) + "\n"
	f.end(t)
	if l := f.m.run.Machine().Limit; l == nil || l.Until.Sub(f.now) > 2*time.Hour {
		t.Fatalf("recorded limit %+v, want capped at 2h", l)
	}
	// A record that says otherwise (edited by hand) is capped again.
	if _, err := f.m.run.Step(func(v msgstate.Msg) (msgstate.Msg, error) {
		v.Limit.Until = time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)
		return v, nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := f.stage.before(context.Background(), f.m, 2); err != nil {
		t.Fatal(err)
	}
	if len(f.slept) != 1 || f.slept[0] != 2*time.Hour {
		t.Errorf("slept %v, want 2h", f.slept)
	}
}

// TestUsageLimitNotAfterCap: past maxUsageLimitWaits a limited attempt
// counts as failed.
func TestUsageLimitNotAfterCap(t *testing.T) {
	f := newLimitFixture(t)
	if _, err := f.m.run.Step(func(v msgstate.Msg) (msgstate.Msg, error) { v.Waits = maxUsageLimitWaits; return v, nil }); err != nil {
		t.Fatal(err)
	}
	f.log = "Claude AI usage limit reached|" + itoa(f.now.Add(time.Hour).Unix()) + "\n"
	if end := f.end(t); end.res.Limit != nil {
		t.Error("a limit past the cap of waits was recorded")
	}
	if v := f.m.run.Machine(); v.Max != 1 || !strings.EqualFold(string(v.State), "finished") {
		t.Errorf("machine %+v: want the attempt counted (max 1)", v)
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
