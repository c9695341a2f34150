// Package msgstate is the life of one message as an explicit state machine.
//
// A message is a single value (Msg). Every step of processing is a
// transition: a pure function from one Msg to the next that refuses steps
// that are not allowed from the current state. The processing loop records
// the new value in runs/<id>/state.json before it performs the step's
// effect (moving a file, running an attempt, reverting the tree), so a
// controller restarted at any instant finds the last recorded value and
// goes on from there with Next. Every transition is idempotent: applied
// again to the value it produced (a replay after a crash) it returns that
// value unchanged, so an effect is never planned twice.
//
//	queued -> claimed -> checkpointed -> running(1) -> finished(1, ok)
//	                                       |               -> collected -> done
//	                                       +-> interrupted(1) -> running(1) again
//	finished(n, failed) -> running(n+1)              (n+1 < max)
//	                    -> reverting(last attempt) -> running(max)
//	                    -> reverting(exhausted) -> dead(RetriesExhausted)
//	finished(n, limited) -> running(n+1), max+1     (after the reset)
//	finished(n, over budget) -> reverting(budget) -> dead(BudgetExceeded)
//	any state before done -> dead(reason)           (refused, cancelled, ...)
//	running(n) -> waiting(n) -> ...                (a person answers: wait.go)
//
// An interrupted attempt (the controller shut down: Ctrl-C, SIGTERM) is not
// a failure. The loop puts the tree back to where that attempt started
// (Base) and runs the same attempt again; it never counts against Max.
// A usage limit recorded with an attempt's end (End with a Limit) does not
// count either: the same write raises Max by one and records the wait, so
// no crash can separate the failure from its extension. An attempt that
// ended with the message's cost over its budget (End with OverBudget)
// fails whatever its exit code, and no attempt follows: the tree is
// reverted and the message dead-lettered (BudgetExceeded). A cancel request
// is recorded (RequestCancel) before anything acts on it, and Next then
// plans the cancellation from whatever state the message is in.
//
// Follow-up collection is part of the machine: an attempt's success is
// recorded (finished, ok, not collected) before anything is collected, and
// the inbox as it was before the attempt is recorded before the attempt
// starts; a replay collects again from that same snapshot, and collection itself only moves files,
// so no follow-up is queued twice.
package msgstate

import (
	"errors"
	"fmt"
	"time"
)

// State is where a message is in its life.
type State string

// The states. A message is in the inbox from Queued to Reverting; Done and
// Dead are final.
const (
	Queued       State = "queued"       // waiting in the inbox
	Claimed      State = "claimed"      // selected; routine chosen, run directory made
	Checkpointed State = "checkpointed" // manifest.json written
	Running      State = "running"      // attempt Attempt handed to a worker
	Finished     State = "finished"     // attempt Attempt ended (OK says how)
	Interrupted  State = "interrupted"  // attempt Attempt stopped by a shutdown
	Reverting    State = "reverting"    // the tree goes back to the checkpoint (Why)
	Done         State = "done"         // moved to inbox/done/
	Dead         State = "dead"         // moved to inbox/dead/ (Reason)
)

// Reason says why a message was dead-lettered; it is the note's "reason:".
type Reason string

// Dead-letter reasons.
const (
	RetriesExhausted   Reason = "RetriesExhausted"
	MaxDepthExceeded   Reason = "MaxDepthExceeded"
	InvalidMessage     Reason = "InvalidMessage"
	InvalidFollowUp    Reason = "InvalidFollowUp"
	UnsafeFileName     Reason = "UnsafeFileName"
	NotRegularFile     Reason = "NotRegularFile"
	RoutineNotFound    Reason = "RoutineNotFound"
	InvalidRoutine     Reason = "InvalidRoutine"
	RoutineDisabled    Reason = "RoutineDisabled"
	NoCapableWorker    Reason = "NoCapableWorker"
	InvalidInputFile   Reason = "InvalidInputFile"
	InputFileNotFound  Reason = "InputFileNotFound"
	RunDirectoryFailed Reason = "RunDirectoryFailed"
	CheckpointFailed   Reason = "CheckpointFailed"
	RevertFailed       Reason = "RevertFailed"
	Cancelled          Reason = "Cancelled"
	BudgetExceeded     Reason = "BudgetExceeded"
)

// RevertCause says why the tree is being reverted.
type RevertCause string

// Revert causes.
const (
	BeforeLastAttempt RevertCause = "before-last-attempt" // then attempt Max runs
	AfterExhausted    RevertCause = "exhausted"           // then dead: RetriesExhausted
	ForCancel         RevertCause = "cancel"              // then dead: Cancelled
	ForBudget         RevertCause = "budget"              // then dead: BudgetExceeded
)

// Limit is a usage limit an attempt's AI tool hit: the message waits until
// Until, then retries from the checkpoint.
type Limit struct {
	// Attempt is the attempt that hit the limit.
	Attempt   int       `json:"attempt"`
	Until     time.Time `json:"until"`
	Notice    string    `json:"notice,omitempty"`
	SessionID string    `json:"session_id,omitempty"`
}

// Result is how an attempt ended, for End.
type Result struct {
	OK bool
	// Blocked: a failing beforeEach hook stopped the attempt before the
	// routine ran (onDeadLetter then does not fire).
	Blocked bool
	// Limit, on a failed attempt, is a usage limit it hit. It is recorded
	// (and the attempt does not count) while the message has had fewer
	// than MaxWaits waits.
	Limit    *Limit
	MaxWaits int
	// OverBudget: the message's cost went over its budget during the
	// attempt. The attempt fails and no other follows.
	OverBudget bool
	// Wait, on a successful attempt (exit 0), makes it wait for a person
	// (wait.go): a question the routine asked, or a review.
	Wait *Wait
}

// Msg is one message's state: the single value the loop carries and
// records.
type Msg struct {
	ID    string `json:"id"`
	State State  `json:"state"`
	// Max is the number of attempts allowed (fixed when claimed).
	Max int `json:"max,omitempty"`
	// Attempt is the current or last attempt (0 before the first).
	Attempt int `json:"attempt,omitempty"`
	// OK is set in Finished when the attempt succeeded.
	OK bool `json:"ok,omitempty"`
	// Collected is set in Finished (OK) once follow-ups were collected.
	Collected bool `json:"collected,omitempty"`
	// Why is set in Reverting.
	Why RevertCause `json:"why,omitempty"`
	// Reason is set in Dead.
	Reason Reason `json:"reason,omitempty"`
	// Base is what the current attempt started from: 0 the checkpoint,
	// k the tree as attempt k left it. An interrupted attempt is put back
	// to it before it runs again.
	Base int `json:"base,omitempty"`
	// Reruns counts attempts run again after an interruption.
	Reruns int `json:"reruns,omitempty"`
	// Blocked is set in Finished when beforeEach stopped the attempt.
	Blocked bool `json:"blocked,omitempty"`
	// Limit is the last usage limit recorded; Waits counts them.
	Limit *Limit `json:"limit,omitempty"`
	Waits int    `json:"waits,omitempty"`
	// Cancel is the reason of a recorded cancel request.
	Cancel string `json:"cancel,omitempty"`
	// Reverted is set in Done when the message's change was undone on
	// request (Undo).
	Reverted bool `json:"reverted,omitempty"`
	// OverBudget is set in Finished when the attempt ended over the
	// message's budget; it stays through Reverting and Dead.
	OverBudget bool `json:"over_budget,omitempty"`
	// Wait is the latest wait for a person (wait.go); Waited counts them.
	Wait   *Wait `json:"wait,omitempty"`
	Waited int   `json:"waited,omitempty"`
}

// ErrTransition is wrapped by every refused transition.
var ErrTransition = errors.New("transition not allowed")

func refuse(m Msg, step string) error {
	return fmt.Errorf("%w: %s of %s in state %s (attempt %d)", ErrTransition, step, m.ID, m.State, m.Attempt)
}

// New is a queued message.
func New(id string) Msg { return Msg{ID: id, State: Queued} }

// Final reports whether the message is done or dead.
func (m Msg) Final() bool { return m.State == Done || m.State == Dead }

// Claim selects a queued message for processing with max attempts. A
// message selected again after a restart (in any later state) stays as it
// is: Next says how it goes on.
func Claim(m Msg, max int) (Msg, error) {
	if m.State != Queued {
		return m, nil
	}
	if max < 1 {
		max = 1
	}
	m.State, m.Max = Claimed, max
	return m, nil
}

// Checkpoint records that manifest.json is written.
func Checkpoint(m Msg) (Msg, error) {
	switch m.State {
	case Checkpointed:
		return m, nil
	case Claimed:
		m.State = Checkpointed
		return m, nil
	}
	return m, refuse(m, "checkpoint")
}

// Start begins attempt n. n must be the next attempt; the one before it
// must have failed (or the tree was just reverted for the last attempt).
// An interrupted attempt starts again with its own number. The loop
// records the inbox as it is before the attempt (the snapshot a
// collection, first or replayed, compares against) before this step.
func Start(m Msg, n int) (Msg, error) {
	if m.State == Running && m.Attempt == n {
		return m, nil
	}
	if m.State == Interrupted && n == m.Attempt {
		m.State, m.Reruns = Running, m.Reruns+1
		return m, nil
	}
	ok := n == m.Attempt+1 && n <= m.Max
	base := 0
	switch m.State {
	case Checkpointed:
		ok = ok && n == 1
	case Finished:
		ok = ok && !m.OK && n < m.Max && !m.OverBudget
		if m.Limit == nil || m.Limit.Attempt != m.Attempt {
			base = m.Attempt // the tree as the failed attempt left it
		}
	case Reverting:
		ok = ok && m.Why == BeforeLastAttempt && n == m.Max
	case Waiting:
		m, ok = startAfterWait(m, n)
		base = m.Attempt
	default:
		ok = false
	}
	if !ok {
		return m, refuse(m, fmt.Sprintf("start attempt %d", n))
	}
	m.State, m.Attempt, m.OK, m.Collected, m.Why, m.Blocked, m.Base = Running, n, false, false, "", false, base
	return m, nil
}

// Finish records how attempt n ended.
func Finish(m Msg, n int, ok bool) (Msg, error) { return End(m, n, Result{OK: ok}) }

// End records how attempt n ended. A failed attempt that hit a usage
// limit (r.Limit, while Waits < r.MaxWaits) does not count: Max rises by
// one in the same step, and the limit is kept for the wait.
func End(m Msg, n int, r Result) (Msg, error) {
	if r.OverBudget {
		r.OK, r.Limit, r.Wait = false, nil, nil
	}
	if m.State == Finished && m.Attempt == n && m.OK == r.OK && m.OverBudget == r.OverBudget && (r.Wait == nil || !r.OK) {
		return m, nil
	}
	if m.State == Waiting && m.Wait != nil && m.Wait.Attempt == n && r.OK && r.Wait != nil {
		return m, nil
	}
	if (m.State != Running && m.State != Interrupted) || m.Attempt != n {
		return m, refuse(m, fmt.Sprintf("finish attempt %d", n))
	}
	if m.State == Interrupted && r.OK {
		return m, refuse(m, "finish an interrupted attempt as a success")
	}
	if r.OK && r.Wait != nil {
		if m.State != Running {
			return m, refuse(m, "wait after an interrupted attempt")
		}
		return startWait(m, n, *r.Wait), nil
	}
	m.State, m.OK, m.Collected, m.Blocked, m.OverBudget = Finished, r.OK, false, r.Blocked && !r.OK, r.OverBudget
	if !r.OK && r.Limit != nil && m.Waits < r.MaxWaits {
		l := *r.Limit
		l.Attempt = n
		m.Limit, m.Waits, m.Max = &l, m.Waits+1, m.Max+1
	}
	return m, nil
}

// Waiting returns the usage limit to wait for before attempt n: the one
// recorded by attempt n-1.
func (m Msg) Waiting(n int) (Limit, bool) {
	if m.Limit == nil || m.Limit.Attempt != n-1 {
		return Limit{}, false
	}
	return *m.Limit, true
}

// RequestCancel records a request to cancel the message with reason (the
// first reason stays). Next then plans the cancellation.
func RequestCancel(m Msg, reason string) (Msg, error) {
	if m.Final() {
		return m, refuse(m, "cancel")
	}
	if m.Cancel == "" {
		if reason == "" {
			reason = "cancelled"
		}
		m.Cancel = reason
	}
	return m, nil
}

// Undo records that a completed message's change was reverted on request.
func Undo(m Msg) (Msg, error) {
	if m.State != Done {
		return m, refuse(m, "undo")
	}
	m.Reverted = true
	return m, nil
}

// Interrupt records that attempt n was stopped by a shutdown: not a
// failure. The tree goes back to the attempt's Base and the attempt runs
// again (Start with the same n).
func Interrupt(m Msg, n int) (Msg, error) {
	if m.State == Interrupted && m.Attempt == n {
		return m, nil
	}
	if m.State != Running || m.Attempt != n {
		return m, refuse(m, fmt.Sprintf("interrupt attempt %d", n))
	}
	m.State = Interrupted
	return m, nil
}

// Collect records that the follow-ups of the successful attempt are in the
// inbox.
func Collect(m Msg) (Msg, error) {
	if m.State == Waiting && m.Wait != nil && m.Wait.Kind == ReviewWait && m.Wait.Reply == OptionApprove {
		m.State, m.OK, m.Collected = Finished, true, true
		return m, nil
	}
	if m.State != Finished || !m.OK {
		return m, refuse(m, "collect follow-ups")
	}
	m.Collected = true
	return m, nil
}

// Revert starts bringing the tree back to the checkpoint.
func Revert(m Msg, why RevertCause) (Msg, error) {
	if m.State == Reverting && m.Why == why {
		return m, nil
	}
	ok := false
	switch why {
	case BeforeLastAttempt:
		ok = m.State == Finished && !m.OK && m.Max > 1 && m.Attempt == m.Max-1 && !m.OverBudget
	case AfterExhausted:
		ok = m.State == Finished && !m.OK && m.Attempt >= m.Max && !m.OverBudget
	case ForBudget:
		ok = m.State == Finished && m.OverBudget
	case ForCancel:
		ok = !m.Final() && m.State != Queued && m.State != Claimed
	case ForReject:
		ok = m.State == Waiting && m.Wait != nil && m.Wait.Kind == ReviewWait && m.Wait.Reply == OptionReject
	}
	if !ok {
		return m, refuse(m, "revert ("+string(why)+")")
	}
	m.State, m.Why = Reverting, why
	return m, nil
}

// Complete files a message whose last attempt succeeded and whose
// follow-ups are collected.
func Complete(m Msg) (Msg, error) {
	switch {
	case m.State == Done:
		return m, nil
	case m.State == Finished && m.OK && m.Collected:
		m.State = Done
		return m, nil
	}
	return m, refuse(m, "complete")
}

// Kill dead-letters a message for reason. A message that ran must have
// its tree reverted first (Reverting), unless the revert itself failed.
func Kill(m Msg, reason Reason) (Msg, error) {
	if m.State == Dead {
		if m.Reason == reason {
			return m, nil
		}
		return m, refuse(m, "dead-letter again as "+string(reason))
	}
	switch m.State {
	case Done:
		return m, refuse(m, "dead-letter")
	case Running, Finished, Interrupted, Waiting:
		if reason != RevertFailed {
			return m, refuse(m, "dead-letter without reverting, as "+string(reason))
		}
	}
	m.State, m.Reason = Dead, reason
	return m, nil
}
