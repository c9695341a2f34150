package pipeline

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/decreehq/decree/pkg/message"
)

// ErrStopping is returned (wrapped) by Submit once Stop was called: the
// controller is about to shut down and takes no new work. A client should
// connect again (to the next controller serving the project).
var ErrStopping = errors.New("the controller is stopping")

// Interruption is an attempt stopped because the loop's context ended (the
// controller shut down): the message stays queued, the tree was put back
// to where the attempt started (Restored; otherwise the next controller
// does it), and the attempt runs again when the message is processed.
type Interruption struct {
	MessageID string
	File      string
	Attempt   int
	Restored  bool
}

// scope says which chains the loop may take messages from. A loop with
// Deps.OwnChainsOnly (decreectl's embedded controller behind `run`) takes
// only the chains submitted to it, so the command never touches, fails or
// dead-letters a message it was not asked to run; a process job widens it
// to every message.
type scope struct {
	all   bool
	owned map[string]bool
}

// Own adds chain to the chains the loop processes (a no-op unless
// Deps.OwnChainsOnly).
func (p *Pipeline) Own(chain string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.scope.owned == nil {
		p.scope.owned = map[string]bool{}
	}
	p.scope.owned[chain] = true
}

// processAll lets the loop take every message (a process job).
func (p *Pipeline) processAll() {
	p.mu.Lock()
	p.scope.all = true
	p.mu.Unlock()
	p.d.Store.AssignChains()
}

// chainFilter returns the scheduler's chain filter: nil when the loop may
// take every message (also refusing unusable files on the way), else a
// test for the chains submitted to it.
func (p *Pipeline) chainFilter() func(chain string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.d.OwnChainsOnly || p.scope.all {
		return nil
	}
	return func(chain string) bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.scope.owned[chain]
	}
}

// Stop makes Submit refuse new messages (ErrStopping) ahead of a shutdown.
func (p *Pipeline) Stop() {
	p.mu.Lock()
	p.stopping = true
	p.mu.Unlock()
}

func (p *Pipeline) isStopping() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stopping
}

// Pending returns the chains submitted to this loop (Submit, Own) that
// still have messages queued or running. An embedded controller waits for
// them before it stops, so that a second client that submitted through it
// gets its chain finished.
func (p *Pipeline) Pending() []string {
	p.mu.Lock()
	owned := map[string]bool{}
	for c := range p.scope.owned {
		owned[c] = true
	}
	runningChains := map[string]bool{}
	for id := range p.running {
		c, _, _ := message.SplitID(id)
		runningChains[c] = true
	}
	p.mu.Unlock()
	if len(owned) == 0 {
		return nil
	}
	entries, err := p.d.Store.ListInbox()
	if err != nil {
		return nil
	}
	seen := map[string]bool{}
	var out []string
	add := func(chain string) {
		if owned[chain] && !seen[chain] && (runningChains[chain] || !p.waitingChain(chain)) {
			seen[chain] = true
			out = append(out, chain)
		}
	}
	for _, c := range sortedKeys(runningChains) {
		add(c)
	}
	// A parallel chain is pending until it is merged (lanes.go).
	for _, c := range p.laneChains() {
		runningChains[c] = true
		add(c)
	}
	for _, e := range entries {
		add(e.Chain)
	}
	return out
}

// WaitPending waits until Pending is empty or ctx ends; report is called
// with the pending chains whenever they change.
func (p *Pipeline) WaitPending(ctx context.Context, report func([]string)) {
	last := ""
	for ctx.Err() == nil {
		pend := p.Pending()
		if len(pend) == 0 {
			return
		}
		if key := strings.Join(pend, ", "); key != last {
			last = key
			report(pend)
		}
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Interruptions returns the attempts stopped by the end of the loop's
// context, oldest first.
func (p *Pipeline) Interruptions() []Interruption {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]Interruption(nil), p.interrupted...)
}
