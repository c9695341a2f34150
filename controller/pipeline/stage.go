package pipeline

import (
	"context"

	"github.com/decreehq/decree/controller/msgstate"
)

// Stages.
//
// The loop itself only asks the message's state machine what comes next
// and performs that step (process.go). Features that act around every
// attempt are stages: each lives in its own file, keeps its state in the
// message's machine (state.json) or run directory, and is called by the
// loop in order at two fixed points, as a task runner calls its hooks:
//
//   - before attempt n, before its start is recorded: a stage may wait
//     (the usage-limit wait) or refuse (its error stops the message);
//   - after attempt n ended, before the end is recorded: a stage may add
//     to the result (a usage limit, which makes the attempt not count), so
//     that what it found is written in the same step as the end.
//
// Other features sit at the loop's own fixed points and say so in their
// files: the disk-space pause (disk.go, before a message is taken),
// object-store pruning (prune.go, after messages and when idle), the
// hooks (hooks.go: beforeEach and afterEach inside the attempt, beforeAll
// and afterAll around a batch, onDeadLetter when filed), replica workers
// (replica.go, around every dispatch) and the pre-checks (precheck.go, on
// request). Retry policy ("retry? when? why?") is answered in one place:
// msgstate.End and msgstate.Next.

// attemptEnd is how an attempt ended, as the stages see it before it is
// recorded.
type attemptEnd struct {
	exitCode int
	errText  string
	res      msgstate.Result
}

// attemptStage is a feature acting around every attempt.
type attemptStage interface {
	// before runs ahead of attempt n; an error stops the attempt.
	before(ctx context.Context, m *msg, n int) error
	// after sees how attempt n ended before the end is recorded.
	after(ctx context.Context, m *msg, n int, end *attemptEnd)
}

// beforeAttempt runs the stages' before, in order.
func (p *Pipeline) beforeAttempt(ctx context.Context, m *msg, n int) error {
	for _, s := range p.stages {
		if err := s.before(ctx, m, n); err != nil {
			return err
		}
	}
	return nil
}

// afterAttempt runs the stages' after, in order.
func (p *Pipeline) afterAttempt(ctx context.Context, m *msg, n int, end *attemptEnd) {
	for _, s := range p.stages {
		s.after(ctx, m, n, end)
	}
}
