package msgstate

import (
	"errors"
	"reflect"
	"testing"
	"time"
)

var deadline = time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC)

func asked(reply string) func(*Msg) {
	return func(m *Msg) {
		m.Waited = 1
		m.Wait = &Wait{ID: "2026010100000000-0-w1", Kind: AskWait, Attempt: m.Attempt, Question: "q?", Options: []string{"yes", "no"}, Deadline: deadline, Reply: reply}
	}
}

func reviewed(reply string) func(*Msg) {
	return func(m *Msg) {
		m.Waited = 1
		m.Wait = &Wait{ID: "2026010100000000-0-w1", Kind: ReviewWait, Attempt: m.Attempt, Options: ReviewOptions, Reply: reply}
	}
}

func withReq(r string) func(*Msg) { return func(m *Msg) { m.Wait.RequestID = r } }

// TestWaitTransitions drives every transition into, inside and out of
// Waiting; every allowed one is also replayed.
func TestWaitTransitions(t *testing.T) {
	ask := &Wait{Kind: AskWait, Question: "q?", Options: []string{"yes", "no"}, Deadline: deadline}
	review := &Wait{Kind: ReviewWait}
	const id = "2026010100000000-0-w1"
	tests := []struct {
		name string
		from Msg
		step func(Msg) (Msg, error)
		want Msg
		err  error // nil: allowed
	}{
		{"ask: the attempt waits and does not count", at(Running, 1, 3), func(m Msg) (Msg, error) { return End(m, 1, Result{OK: true, Wait: ask}) },
			at(Waiting, 1, 4, asked("")), nil},
		{"review: the success waits", at(Running, 2, 3), func(m Msg) (Msg, error) { return End(m, 2, Result{OK: true, Wait: review}) },
			at(Waiting, 2, 3, ok, reviewed("")), nil},
		{"a failed attempt does not wait", at(Running, 1, 3), func(m Msg) (Msg, error) { return End(m, 1, Result{OK: false, Wait: ask}) },
			at(Finished, 1, 3), nil},
		{"an interrupted attempt does not wait", at(Interrupted, 1, 3), func(m Msg) (Msg, error) { return End(m, 1, Result{OK: true, Wait: ask}) }, Msg{}, ErrTransition},
		{"reply to the ask", at(Waiting, 1, 4, asked("")), func(m Msg) (Msg, error) { return Reply(m, id, "yes", "r1") },
			at(Waiting, 1, 4, asked("yes"), withReq("r1")), nil},
		{"reply with an unknown option", at(Waiting, 1, 4, asked("")), func(m Msg) (Msg, error) { return Reply(m, id, "maybe", "") }, Msg{}, ErrUnknownOption},
		{"reply with the reserved timed_out", at(Waiting, 1, 4, asked("")), func(m Msg) (Msg, error) { return Reply(m, id, OptionTimedOut, "") }, Msg{}, ErrUnknownOption},
		{"a second, different reply", at(Waiting, 1, 4, asked("yes"), withReq("r1")), func(m Msg) (Msg, error) { return Reply(m, id, "no", "r2") }, Msg{}, ErrReplied},
		{"the same reply again without its request id", at(Waiting, 1, 4, asked("yes"), withReq("r1")), func(m Msg) (Msg, error) { return Reply(m, id, "yes", "") }, Msg{}, ErrReplied},
		{"reply to another wait", at(Waiting, 1, 4, asked("")), func(m Msg) (Msg, error) { return Reply(m, id+"0", "yes", "") }, Msg{}, ErrTransition},
		{"reply to a message not waiting", at(Running, 1, 3), func(m Msg) (Msg, error) { return Reply(m, id, "yes", "") }, Msg{}, ErrTransition},
		{"reply to a done message", at(Done, 1, 3, ok, collected), func(m Msg) (Msg, error) { return Reply(m, id, "yes", "") }, Msg{}, ErrTransition},
		{"the answered ask: next attempt from its tree", at(Waiting, 1, 4, asked("yes")), func(m Msg) (Msg, error) { return Start(m, 2) },
			at(Running, 2, 4, asked("yes"), func(m *Msg) { m.Base = 1; m.Wait.Attempt = 1 }), nil},
		{"no attempt before the reply", at(Waiting, 1, 4, asked("")), func(m Msg) (Msg, error) { return Start(m, 2) }, Msg{}, ErrTransition},
		{"ask times out: the attempt counts as failed", at(Waiting, 1, 4, asked("")), func(m Msg) (Msg, error) { return TimeOut(m, id) },
			at(Finished, 1, 3, asked(OptionTimedOut)), nil},
		{"no time-out after a reply", at(Waiting, 1, 4, asked("yes")), func(m Msg) (Msg, error) { return TimeOut(m, id) }, Msg{}, ErrTransition},
		{"no time-out of another wait", at(Waiting, 1, 4, asked("")), func(m Msg) (Msg, error) { return TimeOut(m, "x-w9") }, Msg{}, ErrTransition},
		{"review times out", at(Waiting, 2, 3, ok, reviewed("")), func(m Msg) (Msg, error) { return TimeOut(m, id) },
			at(Finished, 2, 3, reviewed(OptionTimedOut)), nil},
		{"approve collects", at(Waiting, 1, 3, ok, reviewed(OptionApprove)), Collect, at(Finished, 1, 3, ok, collected, reviewed(OptionApprove)), nil},
		{"no collection before approval", at(Waiting, 1, 3, ok, reviewed("")), Collect, Msg{}, ErrTransition},
		{"reject reverts", at(Waiting, 1, 3, ok, reviewed(OptionReject)), func(m Msg) (Msg, error) { return Revert(m, ForReject) },
			at(Reverting, 1, 3, ok, why(ForReject), reviewed(OptionReject)), nil},
		{"no reject revert on approval", at(Waiting, 1, 3, ok, reviewed(OptionApprove)), func(m Msg) (Msg, error) { return Revert(m, ForReject) }, Msg{}, ErrTransition},
		{"rejected after the revert", at(Reverting, 1, 3, ok, why(ForReject), reviewed(OptionReject)), func(m Msg) (Msg, error) { return Kill(m, Rejected) },
			at(Dead, 1, 3, ok, why(ForReject), reason(Rejected), reviewed(OptionReject)), nil},
		{"no dead letter without the revert", at(Waiting, 1, 3, ok, reviewed(OptionReject)), func(m Msg) (Msg, error) { return Kill(m, Rejected) }, Msg{}, ErrTransition},
		{"retry after the last attempt raises max", at(Waiting, 3, 3, ok, reviewed(OptionRetry)), func(m Msg) (Msg, error) { return Start(m, 4) },
			at(Running, 4, 4, reviewed(OptionRetry), func(m *Msg) { m.Base = 3; m.Wait.Attempt = 3 }), nil},
		{"cancel while waiting reverts", at(Waiting, 1, 4, asked(""), func(m *Msg) { m.Cancel = "stop" }), func(m Msg) (Msg, error) { return Revert(m, ForCancel) },
			at(Reverting, 1, 4, asked(""), why(ForCancel), func(m *Msg) { m.Cancel = "stop" }), nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { checkStep(t, tc.from, tc.step, tc.want, tc.err) })
	}
}

// checkStep applies step to from: refused (wantErr set) it must fail with
// wantErr and leave the value as it was; allowed it must give want, and
// replayed after a crash it must change nothing.
func checkStep(t *testing.T, from Msg, step func(Msg) (Msg, error), want Msg, wantErr error) {
	t.Helper()
	got, err := step(from)
	if wantErr != nil {
		if !errors.Is(err, wantErr) {
			t.Fatalf("want %v, got %+v, %v", wantErr, got, err)
		}
		if !reflect.DeepEqual(got, from) {
			t.Errorf("a refused step changed the value: %+v", got)
		}
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got  %+v %+v\nwant %+v %+v", got, got.Wait, want, want.Wait)
	}
	again, err := step(got)
	if err != nil || !reflect.DeepEqual(again, got) {
		t.Errorf("replay: %+v, %v; want %+v unchanged", again, err, got)
	}
}

// TestNextWaiting plans a waiting message from every answer.
func TestNextWaiting(t *testing.T) {
	tests := []struct {
		m    Msg
		want Step
	}{
		{at(Waiting, 1, 4, asked("")), StepWait},
		{at(Waiting, 1, 4, asked("yes")), StepAttempt},
		{at(Waiting, 1, 3, ok, reviewed("")), StepWait},
		{at(Waiting, 1, 3, ok, reviewed(OptionApprove)), StepCollect},
		{at(Waiting, 1, 3, ok, reviewed(OptionReject)), StepReject},
		{at(Waiting, 1, 3, ok, reviewed(OptionRetry)), StepAttempt},
		{at(Reverting, 1, 3, why(ForReject)), StepReject},
		{at(Finished, 1, 3, asked(OptionTimedOut)), StepAttempt},
		{at(Finished, 1, 1, asked(OptionTimedOut)), StepExhausted},
		{at(Waiting, 1, 4, asked(""), func(m *Msg) { m.Cancel = "x" }), StepCancel},
	}
	for _, tc := range tests {
		if got := Next(tc.m); got != tc.want {
			t.Errorf("Next(%s attempt %d/%d wait %+v) = %s, want %s", tc.m.State, tc.m.Attempt, tc.m.Max, tc.m.Wait, got, tc.want)
		}
	}
}
