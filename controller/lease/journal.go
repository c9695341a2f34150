package lease

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"slices"

	"github.com/decreehq/decree/pkg/fsutil"
	"github.com/decreehq/decree/pkg/layout"
)

// The journal makes a controller restart safe. It lists the leases that are
// active (token and worker), rewritten whenever one starts or ends. A
// controller that starts and finds leases listed was killed while workers
// ran them; those workers' processes may still run, so it gives out no work
// until every listed worker has reconnected and reported (by a heartbeat)
// that it no longer runs any of them, or until the lease TTL plus the
// fence margin has passed: by then every such process has been killed by
// its supervisor, whose deadline cannot be later than the old
// controller's expiry of the lease. Unknown tokens in heartbeats are
// answered with "stop" as always. A worker heartbeats at once after
// registering when it still holds leases, else after one heartbeat
// interval, and at once after work stopped by the controller.

// JournalFile is the journal's name in the controller's .decree directory.
const JournalFile = layout.Leases

// journalEntry is one active lease in the journal.
type journalEntry struct {
	Token     string `json:"token"`
	Worker    string `json:"worker"`
	MessageID string `json:"message_id,omitempty"`
	Attempt   int32  `json:"attempt,omitempty"`
}

type journalFile struct {
	Leases []journalEntry `json:"leases"`
}

// recoverJournal reads the journal a previous controller left and, when it
// lists leases, holds every assignment until they are accounted for.
func (m *Manager) recoverJournal() error {
	if m.opts.Journal == "" {
		return nil
	}
	b, err := os.ReadFile(m.opts.Journal)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read the lease journal %s: %w", m.opts.Journal, err)
	}
	var j journalFile
	if err := json.Unmarshal(b, &j); err != nil {
		m.log.Warn("the lease journal is damaged; waiting as if every worker still ran something", "path", m.opts.Journal, "err", err)
		j.Leases = []journalEntry{{Token: "unknown", Worker: "*"}}
	}
	if len(j.Leases) == 0 {
		return nil
	}
	m.recovering = map[string][]journalEntry{}
	m.fenced = make(chan struct{})
	for _, e := range j.Leases {
		m.recovering[e.Worker] = append(m.recovering[e.Worker], e)
	}
	wait := m.opts.LeaseTTL + m.opts.FenceMargin
	m.log.Warn("the previous controller stopped while workers ran attempts; giving out no work until they report them stopped",
		"workers", slices.Sorted(maps.Keys(m.recovering)), "at_most", wait)
	m.holdTimer = m.clock.AfterFunc(wait, func() {
		m.mu.Lock()
		defer m.mu.Unlock()
		if len(m.recovering) > 0 {
			m.log.Info("the previous controller's leases have run out; giving out work again")
		}
		m.releaseLocked()
	})
	return nil
}

// accountLocked notes a heartbeat of worker listing tokens: when it lists
// none of the previous controller's leases, that worker runs none of them.
func (m *Manager) accountLocked(worker string, tokens []string) {
	old, ok := m.recovering[worker]
	if !ok {
		return
	}
	for _, e := range old {
		if slices.Contains(tokens, e.Token) {
			return
		}
	}
	delete(m.recovering, worker)
	m.log.Info("worker reports the previous controller's attempts stopped", "worker", worker)
	if len(m.recovering) == 0 {
		m.releaseLocked()
	}
	m.writeJournalLocked()
}

// releaseLocked ends the hold and gives out waiting work.
func (m *Manager) releaseLocked() {
	if m.recovering == nil {
		return
	}
	m.recovering = nil
	if m.holdTimer != nil {
		m.holdTimer.Stop()
	}
	if m.fenced != nil {
		close(m.fenced)
		m.fenced = nil
	}
	m.writeJournalLocked()
	m.assignLocked()
}

// WaitFenced waits until no process of the previous controller's leases
// can still run (see recoverJournal): at once when there were none. The
// loop calls it before it touches the tree for an attempt that was lost
// with the previous controller.
func (m *Manager) WaitFenced(ctx context.Context) error {
	m.mu.Lock()
	ch := m.fenced
	m.mu.Unlock()
	if ch == nil {
		return nil
	}
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// holding reports whether work is held back after a restart.
func (m *Manager) holdingLocked() bool { return m.recovering != nil }

// writeJournalLocked rewrites the journal: the active leases, and the
// previous controller's leases not yet accounted for.
func (m *Manager) writeJournalLocked() {
	if m.opts.Journal == "" {
		return
	}
	var j journalFile
	for _, w := range slices.Sorted(maps.Keys(m.recovering)) {
		j.Leases = append(j.Leases, m.recovering[w]...)
	}
	for _, t := range slices.Sorted(maps.Keys(m.leases)) {
		l := m.leases[t]
		if l.state == stateActive || l.state == stateFencing {
			j.Leases = append(j.Leases, journalEntry{Token: t, Worker: l.sess.req.GetWorkerId(), MessageID: l.a.GetMessageId(), Attempt: l.a.GetAttempt()})
		}
	}
	if j.Leases == nil {
		j.Leases = []journalEntry{}
	}
	b, _ := json.Marshal(j)
	// Replaced without fsync: it must survive the controller's crash,
	// not the machine's (whose local workers die with it).
	if err := fsutil.ReplaceFileUnsynced(m.opts.Journal, append(b, '\n'), 0o644); err != nil {
		m.log.Error("could not write the lease journal; a restart after a crash may not wait for running attempts", "path", m.opts.Journal, "err", err)
	}
}
