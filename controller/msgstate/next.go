package msgstate

// Step is what the loop does next with a message.
type Step string

// Steps, as Next plans them.
const (
	StepClaim      Step = "claim"       // choose the routine, make the run directory
	StepCheckpoint Step = "checkpoint"  // write manifest.json
	StepAttempt    Step = "attempt"     // run attempt Msg.Attempt+1
	StepLost       Step = "lost"        // an attempt was running when the controller died: finish it as failed
	StepResume     Step = "resume"      // an interrupted attempt: put the tree back to its base, run it again
	StepCancel     Step = "cancel"      // a recorded cancel request: revert (if anything ran), dead-letter
	StepCollect    Step = "collect"     // collect the follow-ups of the successful attempt
	StepComplete   Step = "complete"    // move to done/
	StepRevert     Step = "revert"      // revert the tree (again: reverting is idempotent)
	StepRevertLast Step = "revert-last" // revert before the last attempt
	StepExhausted  Step = "exhausted"   // revert, then dead-letter RetriesExhausted
	StepBudget     Step = "budget"      // over budget: revert, then dead-letter BudgetExceeded
	StepWait       Step = "wait"        // waiting for a person: leave the message until a reply or the deadline
	StepReject     Step = "reject"      // a reviewer rejected the change: revert, then dead-letter Rejected
	StepNone       Step = "none"        // final
)

// Next says what to do with m, from whatever state it was recorded in:
// the loop's plan on every iteration and after a restart.
func Next(m Msg) Step {
	if m.Cancel != "" && !m.Final() {
		return StepCancel
	}
	switch m.State {
	case Queued:
		return StepClaim
	case Claimed:
		return StepCheckpoint
	case Checkpointed:
		return StepAttempt
	case Running:
		return StepLost
	case Interrupted:
		return StepResume
	case Finished:
		switch {
		case m.OverBudget:
			return StepBudget
		case m.OK && !m.Collected:
			return StepCollect
		case m.OK:
			return StepComplete
		case m.Attempt >= m.Max:
			return StepExhausted
		case m.Max > 1 && m.Attempt == m.Max-1:
			return StepRevertLast
		}
		return StepAttempt
	case Waiting:
		return nextWaiting(m)
	case Reverting:
		if m.Why == ForReject {
			return StepReject
		}
		if m.Why == BeforeLastAttempt {
			return StepRevertLast // repeat the revert, then the last attempt
		}
		if m.Why == ForBudget {
			return StepBudget // repeat the revert, then dead-letter
		}
		return StepRevert
	}
	return StepNone
}
