package pipeline

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"
)

// The pre-check stage.
//
// Before a message's first attempt, the routine's pre-check runs (the
// routine file run with DECREE_PRE_CHECK=true; routines that never mention
// it count as ready). A routine that cannot run here (its AI tool is not
// installed, a login is missing) is caught before anything is attempted:
// the message stays in the inbox, untouched and not dead-lettered, the
// loop leaves it alone, and the pre-check's own words (the install hint)
// are reported as a warning and end a `process` job. `decreectl process`
// (or a controller restart) tries it again. A routine found ready is not
// asked again for preCheckFresh, so a chain of messages pays for one
// pre-check, not one each.

// preCheckFresh is how long a ready pre-check is trusted.
const preCheckFresh = time.Minute

// notReadyError stops a message whose routine's pre-check failed.
type notReadyError struct {
	Routine string
	Reason  string
}

func (e *notReadyError) Error() string {
	return fmt.Sprintf("routine %s is not ready to run here: %s. Nothing was attempted or dead-lettered; fix it, then run `decreectl process` again", e.Routine, e.Reason)
}

// preCheckStage is the stage; check runs one routine's pre-check.
type preCheckStage struct {
	check func(ctx context.Context, m *msg) (ready bool, reason string, err error)
	now   func() time.Time

	mu    sync.Mutex
	ready map[string]time.Time // routine -> when its pre-check last passed
}

func (s *preCheckStage) before(ctx context.Context, m *msg, n int) error {
	if n != 1 || m.run.Machine().Reruns > 0 || len(m.run.State().Attempts) > 0 {
		return nil // only before the first attempt
	}
	s.mu.Lock()
	at, ok := s.ready[m.rt.Name]
	s.mu.Unlock()
	if ok && s.now().Sub(at) < preCheckFresh {
		return nil
	}
	ready, reason, err := s.check(ctx, m)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		// The pre-check itself could not run (no worker offers it yet):
		// the attempt goes ahead and says what is wrong.
		return nil
	}
	if !ready {
		return &notReadyError{Routine: m.rt.Name, Reason: reason}
	}
	s.mu.Lock()
	if s.ready == nil {
		s.ready = map[string]time.Time{}
	}
	s.ready[m.rt.Name] = s.now()
	s.mu.Unlock()
	return nil
}

func (s *preCheckStage) after(context.Context, *msg, int, *attemptEnd) {}

// newPreCheckStage wires the stage to the loop's pre-check runner.
func (p *Pipeline) newPreCheckStage() *preCheckStage {
	return &preCheckStage{now: time.Now, check: func(ctx context.Context, m *msg) (bool, string, error) {
		res := PreCheckResult{PreCheckTarget: PreCheckTarget{Routine: m.rt.Name, Migration: migrationOf(m.cfg, m.e)}}
		if err := p.preCheck(ctx, m.cfg, &res); err != nil {
			return false, "", err
		}
		return res.Ready, res.Reason, nil
	}}
}

// holdNotReady leaves a message whose routine is not ready in the inbox
// and reports why (see above).
func (p *Pipeline) holdNotReady(ctx context.Context, m *msg, err error) bool {
	var nr *notReadyError
	if !errors.As(err, &nr) {
		return false
	}
	p.holdBack(m, nr)
	p.warn(ctx, m.e.ID, fmt.Sprintf("%s is not run: %v", m.e.ID, nr))
	return true
}

// holdBack leaves m in the inbox, untouched, until `decreectl process`
// (retryNotReady) or a restart; process jobs end saying why (heldBack).
func (p *Pipeline) holdBack(m *msg, why error) {
	p.d.Store.Skip(m.e.File)
	p.mu.Lock()
	if p.notReady == nil {
		p.notReady = map[string]notReady{}
	}
	p.notReady[m.e.ID] = notReady{file: m.e.File, err: why}
	p.mu.Unlock()
}

// notReady is a message held back: by a failed pre-check, or a step its
// state machine refused (halt).
type notReady struct {
	file string
	err  error
}

// notReadyReason returns why message id is held back, if it is.
func (p *Pipeline) notReadyReason(id string) (error, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	nr, ok := p.notReady[id]
	return nr.err, ok
}

// retryNotReady lets the loop try held-back messages again.
func (p *Pipeline) retryNotReady() {
	p.mu.Lock()
	held := p.notReady
	p.notReady = nil
	p.mu.Unlock()
	for _, nr := range held {
		p.d.Store.Unskip(nr.file)
	}
}

// heldBack describes the messages held back by a failed pre-check ("" when
// there are none).
func (p *Pipeline) heldBack() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var parts []string
	for id, nr := range p.notReady {
		parts = append(parts, id+": "+nr.err.Error())
	}
	sort.Strings(parts)
	return strings.Join(parts, "; ")
}
