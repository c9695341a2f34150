package msgstate

import (
	"reflect"
	"testing"
	"time"
)

// at builds a message in a state.
func at(s State, attempt, max int, opts ...func(*Msg)) Msg {
	m := Msg{ID: "2026010100000000-0", State: s, Attempt: attempt, Max: max}
	for _, o := range opts {
		o(&m)
	}
	return m
}

func ok(m *Msg)        { m.OK = true }
func collected(m *Msg) { m.Collected = true }
func why(c RevertCause) func(*Msg) {
	return func(m *Msg) { m.Why = c }
}
func over(m *Msg) { m.OverBudget = true }
func reason(r Reason) func(*Msg) {
	return func(m *Msg) { m.Reason = r }
}

var lim = Limit{Until: time.Date(2026, 1, 1, 3, 0, 0, 0, time.UTC)}

// TestTransitions drives every transition from every state it is allowed
// in, and from states it is refused in.
func TestTransitions(t *testing.T) {
	tests := []struct {
		name string
		from Msg
		step func(Msg) (Msg, error)
		want Msg // ignored when refused
		bad  bool
	}{
		{"claim queued", New("2026010100000000-0"), func(m Msg) (Msg, error) { return Claim(m, 3) }, at(Claimed, 0, 3), false},
		{"claim with no attempts gets one", New("2026010100000000-0"), func(m Msg) (Msg, error) { return Claim(m, 0) }, at(Claimed, 0, 1), false},
		{"claim again after a restart", at(Running, 1, 3), func(m Msg) (Msg, error) { return Claim(m, 5) }, at(Running, 1, 3), false},
		{"checkpoint claimed", at(Claimed, 0, 3), Checkpoint, at(Checkpointed, 0, 3), false},
		{"checkpoint queued", at(Queued, 0, 0), Checkpoint, Msg{}, true},
		{"first attempt", at(Checkpointed, 0, 3), func(m Msg) (Msg, error) { return Start(m, 1) }, at(Running, 1, 3), false},
		{"second attempt as first", at(Checkpointed, 0, 3), func(m Msg) (Msg, error) { return Start(m, 2) }, Msg{}, true},
		{"last attempt needs a revert", at(Finished, 2, 3), func(m Msg) (Msg, error) { return Start(m, 3) }, Msg{}, true},
		{"last attempt after revert", at(Reverting, 2, 3, why(BeforeLastAttempt)), func(m Msg) (Msg, error) { return Start(m, 3) }, at(Running, 3, 3), false},
		{"no attempt after exhaustion revert", at(Reverting, 3, 3, why(AfterExhausted)), func(m Msg) (Msg, error) { return Start(m, 4) }, Msg{}, true},
		{"no attempt after success", at(Finished, 1, 3, ok), func(m Msg) (Msg, error) { return Start(m, 2) }, Msg{}, true},
		{"no attempt beyond max", at(Finished, 1, 1), func(m Msg) (Msg, error) { return Start(m, 2) }, Msg{}, true},
		{"finish ok", at(Running, 1, 3), func(m Msg) (Msg, error) { return Finish(m, 1, true) }, at(Finished, 1, 3, ok), false},
		{"finish failed", at(Running, 2, 3), func(m Msg) (Msg, error) { return Finish(m, 2, false) }, at(Finished, 2, 3), false},
		{"finish another attempt", at(Running, 2, 3), func(m Msg) (Msg, error) { return Finish(m, 1, false) }, Msg{}, true},
		{"finish interrupted as failed", at(Interrupted, 1, 3), func(m Msg) (Msg, error) { return Finish(m, 1, false) }, at(Finished, 1, 3), false},
		{"finish interrupted as success", at(Interrupted, 1, 3), func(m Msg) (Msg, error) { return Finish(m, 1, true) }, Msg{}, true},
		{"a usage limit does not count", at(Running, 2, 3), func(m Msg) (Msg, error) { return End(m, 2, Result{Limit: &lim, MaxWaits: 20}) },
			at(Finished, 2, 4, func(m *Msg) { m.Limit, m.Waits = &Limit{Attempt: 2, Until: lim.Until}, 1 }), false},
		{"a usage limit past the cap counts", at(Running, 2, 3, func(m *Msg) { m.Waits = 20 }), func(m Msg) (Msg, error) { return End(m, 2, Result{Limit: &lim, MaxWaits: 20}) },
			at(Finished, 2, 3, func(m *Msg) { m.Waits = 20 }), false},
		{"a success ignores a limit", at(Running, 1, 3), func(m Msg) (Msg, error) { return End(m, 1, Result{OK: true, Limit: &lim, MaxWaits: 20}) }, at(Finished, 1, 3, ok), false},
		{"blocked by a hook", at(Running, 1, 3), func(m Msg) (Msg, error) { return End(m, 1, Result{Blocked: true}) }, at(Finished, 1, 3, func(m *Msg) { m.Blocked = true }), false},
		{"after a limit the next attempt starts from the checkpoint", at(Finished, 2, 4, func(m *Msg) { m.Limit = &Limit{Attempt: 2} }), func(m Msg) (Msg, error) { return Start(m, 3) },
			at(Running, 3, 4, func(m *Msg) { m.Limit = &Limit{Attempt: 2} }), false},
		{"after a failure the next attempt starts from its tree", at(Finished, 1, 3), func(m Msg) (Msg, error) { return Start(m, 2) }, at(Running, 2, 3, func(m *Msg) { m.Base = 1 }), false},
		{"an interrupted attempt runs again", at(Interrupted, 2, 3, func(m *Msg) { m.Base = 1 }), func(m Msg) (Msg, error) { return Start(m, 2) },
			at(Running, 2, 3, func(m *Msg) { m.Base, m.Reruns = 1, 1 }), false},
		{"an interrupted attempt is not followed by the next", at(Interrupted, 1, 3), func(m Msg) (Msg, error) { return Start(m, 2) }, Msg{}, true},
		{"cancel request", at(Running, 1, 3), func(m Msg) (Msg, error) { return RequestCancel(m, "stop") }, at(Running, 1, 3, func(m *Msg) { m.Cancel = "stop" }), false},
		{"cancel request keeps the first reason", at(Running, 1, 3, func(m *Msg) { m.Cancel = "first" }), func(m Msg) (Msg, error) { return RequestCancel(m, "second") },
			at(Running, 1, 3, func(m *Msg) { m.Cancel = "first" }), false},
		{"cancel a done message", at(Done, 1, 3, ok, collected), func(m Msg) (Msg, error) { return RequestCancel(m, "x") }, Msg{}, true},
		{"undo a done message", at(Done, 1, 3, ok, collected), Undo, at(Done, 1, 3, ok, collected, func(m *Msg) { m.Reverted = true }), false},
		{"undo a dead message", at(Dead, 1, 3, reason(Cancelled)), Undo, Msg{}, true},
		{"interrupt running", at(Running, 1, 3), func(m Msg) (Msg, error) { return Interrupt(m, 1) }, at(Interrupted, 1, 3), false},
		{"interrupt finished", at(Finished, 1, 3), func(m Msg) (Msg, error) { return Interrupt(m, 1) }, Msg{}, true},
		{"collect after success", at(Finished, 1, 3, ok), Collect, at(Finished, 1, 3, ok, collected), false},
		{"collect after failure", at(Finished, 1, 3), Collect, Msg{}, true},
		{"complete collected", at(Finished, 1, 3, ok, collected), Complete, at(Done, 1, 3, ok, collected), false},
		{"complete uncollected", at(Finished, 1, 3, ok), Complete, Msg{}, true},
		{"complete failed", at(Finished, 1, 3), Complete, Msg{}, true},
		{"revert before last", at(Finished, 2, 3), func(m Msg) (Msg, error) { return Revert(m, BeforeLastAttempt) }, at(Reverting, 2, 3, why(BeforeLastAttempt)), false},
		{"revert before last too early", at(Finished, 1, 3), func(m Msg) (Msg, error) { return Revert(m, BeforeLastAttempt) }, Msg{}, true},
		{"revert exhausted", at(Finished, 3, 3), func(m Msg) (Msg, error) { return Revert(m, AfterExhausted) }, at(Reverting, 3, 3, why(AfterExhausted)), false},
		{"revert exhausted too early", at(Finished, 2, 3), func(m Msg) (Msg, error) { return Revert(m, AfterExhausted) }, Msg{}, true},
		{"revert for cancel", at(Interrupted, 1, 3), func(m Msg) (Msg, error) { return Revert(m, ForCancel) }, at(Reverting, 1, 3, why(ForCancel)), false},
		{"revert for cancel of done", at(Done, 1, 3, ok, collected), func(m Msg) (Msg, error) { return Revert(m, ForCancel) }, Msg{}, true},
		{"kill exhausted after revert", at(Reverting, 3, 3, why(AfterExhausted)), func(m Msg) (Msg, error) { return Kill(m, RetriesExhausted) }, at(Dead, 3, 3, why(AfterExhausted), reason(RetriesExhausted)), false},
		{"kill before running", at(Claimed, 0, 3), func(m Msg) (Msg, error) { return Kill(m, RoutineNotFound) }, at(Dead, 0, 3, reason(RoutineNotFound)), false},
		{"kill queued", New("2026010100000000-0"), func(m Msg) (Msg, error) { return Kill(m, MaxDepthExceeded) }, Msg{ID: "2026010100000000-0", State: Dead, Reason: MaxDepthExceeded}, false},
		{"kill finished without revert", at(Finished, 3, 3), func(m Msg) (Msg, error) { return Kill(m, RetriesExhausted) }, Msg{}, true},
		{"kill after failed revert", at(Finished, 3, 3), func(m Msg) (Msg, error) { return Kill(m, RevertFailed) }, at(Dead, 3, 3, reason(RevertFailed)), false},
		{"over budget ends the attempt failed", at(Running, 1, 3), func(m Msg) (Msg, error) { return End(m, 1, Result{OK: true, OverBudget: true}) }, at(Finished, 1, 3, over), false},
		{"over budget ignores a usage limit", at(Running, 1, 3), func(m Msg) (Msg, error) { return End(m, 1, Result{OverBudget: true, Limit: &lim, MaxWaits: 20}) }, at(Finished, 1, 3, over), false},
		{"no attempt after over budget", at(Finished, 1, 3, over), func(m Msg) (Msg, error) { return Start(m, 2) }, Msg{}, true},
		{"no revert before last after over budget", at(Finished, 2, 3, over), func(m Msg) (Msg, error) { return Revert(m, BeforeLastAttempt) }, Msg{}, true},
		{"revert for budget", at(Finished, 1, 3, over), func(m Msg) (Msg, error) { return Revert(m, ForBudget) }, at(Reverting, 1, 3, over, why(ForBudget)), false},
		{"revert for budget when within it", at(Finished, 1, 3), func(m Msg) (Msg, error) { return Revert(m, ForBudget) }, Msg{}, true},
		{"no exhaustion revert when over budget", at(Finished, 3, 3, over), func(m Msg) (Msg, error) { return Revert(m, AfterExhausted) }, Msg{}, true},
		{"kill over budget after revert", at(Reverting, 1, 3, over, why(ForBudget)), func(m Msg) (Msg, error) { return Kill(m, BudgetExceeded) }, at(Dead, 1, 3, over, why(ForBudget), reason(BudgetExceeded)), false},
		{"kill over budget without revert", at(Finished, 1, 3, over), func(m Msg) (Msg, error) { return Kill(m, BudgetExceeded) }, Msg{}, true},
		{"kill done", at(Done, 1, 3, ok, collected), func(m Msg) (Msg, error) { return Kill(m, Cancelled) }, Msg{}, true},
		{"kill dead for another reason", at(Dead, 0, 3, reason(Cancelled)), func(m Msg) (Msg, error) { return Kill(m, RetriesExhausted) }, Msg{}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var want error
			if tc.bad {
				want = ErrTransition
			}
			checkStep(t, tc.from, tc.step, tc.want, want)
		})
	}
}

// TestNext plans from every state.
func TestNext(t *testing.T) {
	tests := []struct {
		m    Msg
		want Step
	}{
		{New("x"), StepClaim},
		{at(Claimed, 0, 3), StepCheckpoint},
		{at(Checkpointed, 0, 3), StepAttempt},
		{at(Running, 1, 3), StepLost},
		{at(Interrupted, 1, 3), StepResume},
		{at(Finished, 1, 3, ok), StepCollect},
		{at(Finished, 1, 3, ok, collected), StepComplete},
		{at(Finished, 1, 3), StepAttempt},
		{at(Finished, 2, 3), StepRevertLast},
		{at(Finished, 1, 2), StepRevertLast},
		{at(Finished, 3, 3), StepExhausted},
		{at(Finished, 1, 1), StepExhausted},
		{at(Reverting, 2, 3, why(BeforeLastAttempt)), StepRevertLast},
		{at(Reverting, 3, 3, why(AfterExhausted)), StepRevert},
		{at(Running, 1, 3, func(m *Msg) { m.Cancel = "x" }), StepCancel},
		{at(Claimed, 0, 3, func(m *Msg) { m.Cancel = "x" }), StepCancel},
		{at(Done, 1, 3, func(m *Msg) { m.Cancel = "x" }), StepNone},
		{at(Finished, 1, 3, over), StepBudget},
		{at(Finished, 3, 3, over), StepBudget},
		{at(Finished, 2, 3, over), StepBudget},
		{at(Reverting, 1, 3, over, why(ForBudget)), StepBudget},
		{at(Finished, 1, 3, over, func(m *Msg) { m.Cancel = "x" }), StepCancel},
		{at(Done, 1, 3), StepNone},
		{at(Dead, 1, 3), StepNone},
	}
	for _, tc := range tests {
		if got := Next(tc.m); got != tc.want {
			t.Errorf("Next(%s attempt %d/%d ok=%v collected=%v) = %s, want %s", tc.m.State, tc.m.Attempt, tc.m.Max, tc.m.OK, tc.m.Collected, got, tc.want)
		}
	}
}

// TestWholeLives walks complete lives through Next and the transitions:
// the plan always leads to done or dead, by the retry rules.
func TestWholeLives(t *testing.T) {
	for _, tc := range []struct {
		name    string
		max     int
		results []bool // attempt outcomes
		over    int    // the attempt that ends over budget (0: none)
		want    Msg
	}{
		{"first attempt succeeds", 3, []bool{true}, 0, Msg{State: Done, Max: 3, Attempt: 1, OK: true, Collected: true}},
		{"third attempt succeeds", 3, []bool{false, false, true}, 0, Msg{State: Done, Max: 3, Attempt: 3, OK: true, Collected: true}},
		{"all fail", 3, []bool{false, false, false}, 0, Msg{State: Dead, Max: 3, Attempt: 3, Why: AfterExhausted, Reason: RetriesExhausted}},
		{"one attempt fails", 1, []bool{false}, 0, Msg{State: Dead, Max: 1, Attempt: 1, Why: AfterExhausted, Reason: RetriesExhausted}},
		{"a budget stops the message mid-retries", 3, []bool{false, false, true}, 2, Msg{State: Dead, Max: 3, Attempt: 2, Base: 1, Why: ForBudget, Reason: BudgetExceeded, OverBudget: true}},
		{"a successful attempt over budget is dead too", 3, []bool{true}, 1, Msg{State: Dead, Max: 3, Attempt: 1, Why: ForBudget, Reason: BudgetExceeded, OverBudget: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := New("")
			var log []Step
			for i := 0; i < 50 && !m.Final(); i++ {
				step := Next(m)
				log = append(log, step)
				apply := func(m Msg) (Msg, error) {
					switch step {
					case StepClaim:
						return Claim(m, tc.max)
					case StepCheckpoint:
						return Checkpoint(m)
					case StepAttempt:
						m2, err := Start(m, m.Attempt+1)
						if err != nil {
							return m2, err
						}
						return End(m2, m2.Attempt, Result{OK: tc.results[m2.Attempt-1], OverBudget: m2.Attempt == tc.over})
					case StepBudget:
						if m.State == Reverting {
							return Kill(m, BudgetExceeded)
						}
						return Revert(m, ForBudget)
					case StepRevertLast:
						if m.State == Reverting {
							m2, err := Start(m, m.Attempt+1)
							if err != nil {
								return m2, err
							}
							return Finish(m2, m2.Attempt, tc.results[m2.Attempt-1])
						}
						return Revert(m, BeforeLastAttempt)
					case StepCollect:
						return Collect(m)
					case StepComplete:
						return Complete(m)
					case StepExhausted:
						return Revert(m, AfterExhausted)
					case StepRevert:
						return Kill(m, RetriesExhausted)
					}
					t.Fatalf("unexpected step %s in %+v", step, m)
					return m, nil
				}
				next, err := apply(m)
				if err != nil {
					t.Fatalf("step %s: %v", step, err)
				}
				m = next
			}
			if !reflect.DeepEqual(m, tc.want) {
				t.Fatalf("ended %+v\nwant      %+v\nsteps %v", m, tc.want, log)
			}
		})
	}
}
