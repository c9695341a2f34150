package msgstate

import (
	"errors"
	"fmt"
	"slices"
	"time"
)

// Waiting for a person.
//
// An attempt that ends by asking a question (exit 0 with a question file)
// or, with a review gate, by succeeding, moves the message to Waiting in
// the same write as the attempt's end (End with Result.Wait). The wait
// has an id (<message id>-w<k>), its options and maybe a deadline. The
// message stays in the inbox; the loop leaves its chain alone until a
// reply (Reply) or the deadline (TimeOut) is recorded, and Next then plans
// from the answer:
//
//	running(n) -> waiting(n, ask)    -> [reply]     -> running(n+1)  (the ask did not count: Max+1)
//	                                 -> [timed_out] -> finished(n, failed): the retry rules
//	running(n) -> waiting(n, review) -> [approve]   -> finished(n, ok, collected) -> done
//	                                 -> [reject]    -> reverting(reject) -> dead(Rejected)
//	                                 -> [retry]     -> running(n+1)  (Max raised when needed)
//	                                 -> [timed_out] -> finished(n, failed): the retry rules
//
// A cancel request while waiting plans the cancellation as everywhere.

// WaitKind says what a wait is for.
type WaitKind string

// Wait kinds.
const (
	AskWait    WaitKind = "ask"    // the routine asked a question
	ReviewWait WaitKind = "review" // a successful attempt awaits review
)

// Reserved options: a review's, and the outcome of a wait whose deadline
// passed.
const (
	OptionApprove  = "approve"
	OptionReject   = "reject"
	OptionRetry    = "retry"
	OptionTimedOut = "timed_out"
)

// ReviewOptions are the options of every review.
var ReviewOptions = []string{OptionApprove, OptionReject, OptionRetry}

// Waiting is the state of a message whose attempt waits for a person.
const Waiting State = "waiting"

// Rejected is the dead-letter reason of a change a reviewer rejected.
const Rejected Reason = "Rejected"

// ForReject reverts the tree of a rejected change (then dead: Rejected).
const ForReject RevertCause = "reject"

// Wait is a question waiting for a reply.
type Wait struct {
	// ID is <message id>-w<k>, k counting the message's waits from 1.
	ID       string    `json:"id"`
	Kind     WaitKind  `json:"kind"`
	Attempt  int       `json:"attempt"`
	Question string    `json:"question,omitempty"`
	Options  []string  `json:"options"`
	Deadline time.Time `json:"deadline,omitzero"`
	// Reply is the chosen option once recorded (OptionTimedOut when the
	// deadline passed first); RequestID the client's key of that reply.
	Reply     string `json:"reply,omitempty"`
	RequestID string `json:"request_id,omitempty"`
}

// Errors of Reply, besides ErrTransition (the message is not waiting, or
// the reply names another wait).
var (
	// ErrUnknownOption: the option is not one the wait offers.
	ErrUnknownOption = errors.New("unknown option")
	// ErrReplied: the wait has its answer already.
	ErrReplied = errors.New("already answered")
)

// WaitID is the id of a message's k-th wait.
func WaitID(msgID string, k int) string { return fmt.Sprintf("%s-w%d", msgID, k) }

// startWait is End's part for an attempt that ends in a wait.
func startWait(m Msg, n int, w Wait) Msg {
	m.Waited++
	w.ID, w.Attempt, w.Reply, w.RequestID = WaitID(m.ID, m.Waited), n, "", ""
	if w.Kind == ReviewWait {
		w.Options = append([]string(nil), ReviewOptions...)
	} else {
		m.Max++ // asking is not a failed attempt
	}
	m.State, m.OK, m.Wait = Waiting, w.Kind == ReviewWait, &w
	return m
}

// Reply records the answer option to wait id (request is the client's
// request id, "" for none). It refuses a message that is not waiting or
// waits under another id (ErrTransition), an option the wait does not
// offer (ErrUnknownOption) and a second, different answer (ErrReplied);
// the same answer again is a replay and changes nothing.
func Reply(m Msg, id, option, request string) (Msg, error) {
	if m.State != Waiting || m.Wait == nil || m.Wait.ID != id {
		return m, refuse(m, "reply to "+id)
	}
	if m.Wait.Reply != "" {
		if m.Wait.Reply == option && m.Wait.RequestID == request {
			return m, nil
		}
		return m, fmt.Errorf("%w: wait %s was answered %q", ErrReplied, id, m.Wait.Reply)
	}
	if !slices.Contains(m.Wait.Options, option) {
		return m, fmt.Errorf("%w %q for wait %s; choose one of %v", ErrUnknownOption, option, id, m.Wait.Options)
	}
	w := *m.Wait
	w.Reply, w.RequestID = option, request
	m.Wait = &w
	return m, nil
}

// TimeOut records that wait id's deadline passed with no reply: the
// attempt counts as failed and the retry rules go on (Next). The next
// attempt sees the reserved option OptionTimedOut.
func TimeOut(m Msg, id string) (Msg, error) {
	if m.Wait != nil && m.Wait.ID == id && m.Wait.Reply == OptionTimedOut && m.State == Finished {
		return m, nil
	}
	if m.State != Waiting || m.Wait == nil || m.Wait.ID != id || m.Wait.Reply != "" {
		return m, refuse(m, "time out "+id)
	}
	w := *m.Wait
	w.Reply = OptionTimedOut
	if w.Kind == AskWait {
		m.Max-- // the ask counts after all
	}
	m.State, m.OK, m.Collected, m.Wait = Finished, false, false, &w
	return m, nil
}

// Answer is the reply the attempts after wait see: the latest wait's
// answer, if it has one.
func (m Msg) Answer() (Wait, bool) {
	if m.Wait == nil || m.Wait.Reply == "" {
		return Wait{}, false
	}
	return *m.Wait, true
}

// Pending reports whether m waits for a reply.
func (m Msg) Pending() bool {
	return m.State == Waiting && m.Wait != nil && m.Wait.Reply == "" && !m.Final()
}

// nextWaiting plans a waiting message.
func nextWaiting(m Msg) Step {
	if m.Wait == nil || m.Wait.Reply == "" {
		return StepWait
	}
	switch {
	case m.Wait.Kind == AskWait, m.Wait.Reply == OptionRetry:
		return StepAttempt
	case m.Wait.Reply == OptionApprove:
		return StepCollect
	case m.Wait.Reply == OptionReject:
		return StepReject
	}
	return StepWait
}

// startAfterWait is Start's part from Waiting: attempt n follows the
// answered ask or a review's retry, from the tree the waiting attempt left.
func startAfterWait(m Msg, n int) (Msg, bool) {
	if m.Wait == nil || n != m.Attempt+1 {
		return m, false
	}
	switch {
	case m.Wait.Kind == AskWait && m.Wait.Reply != "" && m.Wait.Reply != OptionTimedOut:
	case m.Wait.Kind == ReviewWait && m.Wait.Reply == OptionRetry:
		m.Max = max(m.Max, n) // a reviewer's retry is never refused for lack of attempts
	default:
		return m, false
	}
	return m, n <= m.Max
}
