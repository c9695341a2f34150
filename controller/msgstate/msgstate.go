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
//	                                       +-> interrupted(1) (shutdown)
//	finished(n, failed) -> running(n+1)              (n+1 < max)
//	                    -> reverting(last attempt) -> running(max)
//	                    -> reverting(exhausted) -> dead(RetriesExhausted)
//	any state before done -> dead(reason)           (refused, cancelled, ...)
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
)

// RevertCause says why the tree is being reverted.
type RevertCause string

// Revert causes.
const (
	BeforeLastAttempt RevertCause = "before-last-attempt" // then attempt Max runs
	AfterExhausted    RevertCause = "exhausted"           // then dead: RetriesExhausted
	ForCancel         RevertCause = "cancel"              // then dead: Cancelled
)

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
// The loop records the inbox as it is before the attempt (the snapshot a
// collection, first or replayed, compares against) before this step.
func Start(m Msg, n int) (Msg, error) {
	if m.State == Running && m.Attempt == n {
		return m, nil
	}
	ok := n == m.Attempt+1 && n <= m.Max
	switch m.State {
	case Checkpointed:
		ok = ok && n == 1
	case Finished:
		ok = ok && !m.OK && n < m.Max
	case Reverting:
		ok = ok && m.Why == BeforeLastAttempt && n == m.Max
	default:
		ok = false
	}
	if !ok {
		return m, refuse(m, fmt.Sprintf("start attempt %d", n))
	}
	m.State, m.Attempt, m.OK, m.Collected, m.Why = Running, n, false, false, ""
	return m, nil
}

// Finish records how attempt n ended.
func Finish(m Msg, n int, ok bool) (Msg, error) {
	if m.State == Finished && m.Attempt == n && m.OK == ok {
		return m, nil
	}
	if (m.State != Running && m.State != Interrupted) || m.Attempt != n {
		return m, refuse(m, fmt.Sprintf("finish attempt %d", n))
	}
	if m.State == Interrupted && ok {
		return m, refuse(m, "finish an interrupted attempt as a success")
	}
	m.State, m.OK, m.Collected = Finished, ok, false
	return m, nil
}

// Extend raises the number of attempts to max after a failed attempt that
// does not count (it hit a usage limit). A lower or equal max changes
// nothing, so a replay does not extend twice.
func Extend(m Msg, max int) (Msg, error) {
	if m.State != Finished || m.OK {
		return m, refuse(m, "extend the attempts")
	}
	if max > m.Max {
		m.Max = max
	}
	return m, nil
}

// Interrupt records that attempt n was stopped by a shutdown: not a
// failure; the next controller finishes it as failed and goes on.
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
		ok = m.State == Finished && !m.OK && m.Max > 1 && m.Attempt == m.Max-1
	case AfterExhausted:
		ok = m.State == Finished && !m.OK && m.Attempt >= m.Max
	case ForCancel:
		ok = !m.Final() && m.State != Queued && m.State != Claimed
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
	case Running, Finished, Interrupted:
		if reason != RevertFailed {
			return m, refuse(m, "dead-letter without reverting, as "+string(reason))
		}
	}
	m.State, m.Reason = Dead, reason
	return m, nil
}
