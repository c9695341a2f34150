// The review gate (see wait.go and stage_ask.go): an attempt awaiting
// review keeps its follow-ups held back; approve collects them, reject
// reverts and dead-letters, retry and time-outs discard them.

package pipeline

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/decreehq/decree/controller/msgstate"
	"github.com/decreehq/decree/controller/store"
	"github.com/decreehq/decree/pkg/layout"
)

// reject reverts a change a reviewer rejected and dead-letters it.
func (p *Pipeline) reject(ctx context.Context, m *msg) error {
	if err := p.record(m, func(v msgstate.Msg) (msgstate.Msg, error) { return msgstate.Revert(v, msgstate.ForReject) }); err != nil {
		return err
	}
	if err := p.revert(ctx, m.run, m.manifest); err != nil {
		return p.afterRevertError(ctx, m, err)
	}
	if err := p.record(m, func(v msgstate.Msg) (msgstate.Msg, error) { return msgstate.Kill(v, msgstate.Rejected) }); err != nil {
		return err
	}
	v := m.run.Machine()
	note := ""
	if v.Wait != nil {
		if p2, err := m.run.Path(layout.ReplyFileName(v.Waited)); err == nil {
			if b, err := os.ReadFile(p2); err == nil {
				note = strings.TrimSpace(string(b))
			}
		}
	}
	if note == "" {
		note = "(no note)"
	}
	m.note = &store.DeadNote{Reason: string(msgstate.Rejected), MessageID: m.e.ID,
		Detail: fmt.Sprintf("A reviewer rejected the change of attempt %d; the tree was reverted to the checkpoint. Their note:\n\n%s\n\nRequeue the message to run it again.", v.Attempt, note)}
	return p.file(ctx, m)
}

// holdFollowUps keeps the follow-ups of an attempt awaiting review out of
// the inbox and outbox until it is approved.
func (p *Pipeline) holdFollowUps(run *store.Run, before store.InboxSnapshot) {
	held := filepath.Join(run.Dir(), layout.HeldFollowUps)
	p.moveFollowUps(run, before, filepath.Join(held, layout.Inbox), filepath.Join(held, layout.Outbox))
}

// restoreHeld puts an approved attempt's follow-ups back in place, to be
// collected; it can be repeated.
func (p *Pipeline) restoreHeld(run *store.Run) error {
	held := filepath.Join(run.Dir(), layout.HeldFollowUps)
	for _, area := range []string{layout.Inbox, layout.Outbox} {
		ents, err := os.ReadDir(filepath.Join(held, area))
		if err != nil {
			continue
		}
		for _, de := range ents {
			if de.Name() == snapshotMarker {
				continue
			}
			dst := layout.Path(p.d.Store.Root(), area, de.Name())
			if _, err := os.Lstat(dst); err == nil {
				continue
			}
			if err := os.Rename(filepath.Join(held, area, de.Name()), dst); err != nil {
				return fmt.Errorf("put back the follow-up %s: %w", de.Name(), err)
			}
		}
	}
	return nil
}

// discardHeld keeps the held follow-ups of attempt n, not approved, with
// the discarded ones.
func discardHeld(run *store.Run, n int) {
	held := filepath.Join(run.Dir(), layout.HeldFollowUps)
	if _, err := os.Stat(held); err != nil {
		return
	}
	dst := filepath.Join(run.Dir(), layout.DiscardedDir(n))
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err == nil {
		_ = os.Rename(held, dst)
	}
}

// snapshotMarker, in the held follow-ups' directory, says the inbox
// snapshot of an approval is recorded (restoring may have begun).
const snapshotMarker = ".snapshot-recorded"

// collectApproved collects the follow-ups of an approved attempt. The
// inbox may have changed a lot while the review waited (other chains'
// follow-ups queued), so the snapshot taken before the attempt no longer
// says what is new: a fresh one is recorded first (once: a replay after a
// crash uses it), then the held follow-ups go back and are collected
// against it.
func (p *Pipeline) collectApproved(ctx context.Context, m *msg) error {
	held := filepath.Join(m.run.Dir(), layout.HeldFollowUps)
	marker := filepath.Join(held, snapshotMarker)
	before, ok := store.InboxSnapshot{}, false
	if _, err := os.Stat(marker); err == nil {
		before, ok = m.run.InboxSnapshot()
	}
	if !ok {
		snap, err := p.d.Store.SnapshotInbox()
		if err != nil {
			return err
		}
		defer p.d.Store.ReleaseSnapshot()
		if err := m.run.RecordInboxSnapshot(snap); err != nil {
			return err
		}
		if err := m.run.Commit(); err != nil {
			return err
		}
		if err := os.MkdirAll(held, 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(marker, nil, 0o644); err != nil {
			return err
		}
		before = snap
	}
	if err := p.restoreHeld(m.run); err != nil {
		return err
	}
	return p.collect(ctx, m, before)
}
