package pipeline

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/decreehq/decree/controller/events"
	"github.com/decreehq/decree/controller/store"
	"github.com/decreehq/decree/pkg/checkpoint"
	"github.com/decreehq/decree/pkg/config"
	"github.com/decreehq/decree/pkg/fsutil"
	"github.com/decreehq/decree/pkg/usagelimit"
)

// Usage-limit waits (see pkg/usagelimit).
//
// After a failed attempt whose log shows an AI tool's usage-limit notice,
// the message is not failed: usageLimited records the wait in
// runs/<id>/usage-limit.json, gives the message one more attempt (the
// limited one does not count against max_retries; its log and diff stay as
// an audit trail), and reverts the tree to the checkpoint. Before the next
// attempt pauseForUsageLimit waits until the reset, also after a controller
// restart, and the retry gets DECREE_PREVIOUS_SESSION_ID when the limited
// attempt printed a session id. The message stays in the inbox all along,
// so it is never listed in processed.md or dead/ because of a limit; a
// stopped controller (SIGINT) leaves it queued and waiting.
//
// The seam is narrow on purpose: two calls in the attempt loop and one in
// dispatchRoutine.

// usageLimitFile is the record of the last wait in the run directory.
const usageLimitFile = "usage-limit.json"

// maxUsageLimitWaits bounds the free retries of one message: past it a
// limited attempt counts like any failure.
const maxUsageLimitWaits = 20

// usageLimitRecord is usage-limit.json.
type usageLimitRecord struct {
	// Attempt is the attempt that hit the limit.
	Attempt   int       `json:"attempt"`
	Until     time.Time `json:"until"`
	Notice    string    `json:"notice"`
	SessionID string    `json:"session_id,omitempty"`
	// Waits counts the message's usage-limit waits so far.
	Waits int `json:"waits"`
}

// usageWait is the wait in progress, for GetStatus.
type usageWait struct {
	id     string
	until  time.Time
	notice string
}

func readUsageLimit(run *store.Run) (usageLimitRecord, bool) {
	var rec usageLimitRecord
	path, err := run.Path(usageLimitFile)
	if err != nil {
		return rec, false
	}
	data, err := os.ReadFile(path)
	if err != nil || json.Unmarshal(data, &rec) != nil {
		return rec, false
	}
	return rec, true
}

// usageLimited checks failed attempt n for a usage-limit notice. When it
// finds one it records the wait, extends the message's attempts by one,
// reverts the tree and returns the new attempt budget with true.
func (p *Pipeline) usageLimited(ctx context.Context, cfg *config.Config, e store.Entry, run *store.Run, manifest *checkpoint.Manifest, n int) (int, bool) {
	if cfg.UsageLimit.Disabled || ctx.Err() != nil {
		return 0, false
	}
	logPath, err := p.d.Store.LogPath(e.ID, n, "routine")
	if err != nil {
		return 0, false
	}
	log := readTail(logPath, 256<<10)
	notice, ok := usagelimit.Detect(log, usagelimit.Options{Location: p.d.Store.Location(), Patterns: cfg.UsageLimit.Patterns, MaxWait: cfg.UsageLimit.MaxWait})
	if !ok {
		return 0, false
	}
	prev, _ := readUsageLimit(run)
	if prev.Waits >= maxUsageLimitWaits {
		p.warn(ctx, e.ID, fmt.Sprintf("usage limit reached again after %d waits; this attempt counts as failed", prev.Waits))
		return 0, false
	}
	rec := usageLimitRecord{Attempt: n, Until: notice.Reset, Notice: notice.Line, SessionID: usagelimit.SessionID(log), Waits: prev.Waits + 1}
	data, _ := json.MarshalIndent(rec, "", "  ")
	path, err := run.Path(usageLimitFile)
	if err == nil {
		err = fsutil.WriteFileAtomic(path, append(data, '\n'), 0o644)
	}
	if err != nil {
		p.log.Error("record usage-limit wait", "message", e.ID, "err", err)
		return 0, false
	}
	budget := 0
	if err := run.Update(func(s *store.RunState) error { s.MaxAttempts++; budget = s.MaxAttempts; return nil }); err != nil {
		p.log.Error("extend attempts after a usage limit", "message", e.ID, "err", err)
		return 0, false
	}
	if err := p.revert(ctx, run, manifest); err != nil {
		p.log.Error("revert after a usage limit", "message", e.ID, "err", err)
	}
	return budget, true
}

// pauseForUsageLimit waits, before attempt n, for the reset recorded after
// attempt n-1. It returns ctx's error when ctx ends first.
func (p *Pipeline) pauseForUsageLimit(ctx context.Context, e store.Entry, run *store.Run, n int) error {
	rec, ok := readUsageLimit(run)
	if !ok || rec.Attempt != n-1 {
		return nil
	}
	wait := time.Until(rec.Until)
	if wait <= 0 {
		return nil
	}
	text := fmt.Sprintf("usage limit reached; waiting until %s (%s) to retry %s: %s",
		rec.Until.In(p.d.Store.Location()).Format("15:04"), wait.Round(time.Second), e.ID, rec.Notice)
	p.log.Info(text) // clients print the event; a daemon logs at info level
	p.emit(ctx, &events.Event{Kind: events.UsageLimitWait, MessageID: e.ID, Chain: e.Chain,
		Attempt: rec.Attempt, Until: rec.Until, Text: rec.Notice})
	p.mu.Lock()
	p.limit = &usageWait{id: e.ID, until: rec.Until, notice: rec.Notice}
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		p.limit = nil
		p.mu.Unlock()
	}()
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// resumeEnv adds DECREE_PREVIOUS_SESSION_ID to attempt n's environment
// when attempt n-1 hit a usage limit and printed a session id.
func resumeEnv(run *store.Run, n int, env map[string]string) {
	if rec, ok := readUsageLimit(run); ok && rec.Attempt == n-1 && rec.SessionID != "" {
		env["DECREE_PREVIOUS_SESSION_ID"] = rec.SessionID
	}
}

// UsageLimitWait reports the message waiting for a usage limit, if any.
func (p *Pipeline) UsageLimitWait() (id string, until time.Time, notice string, ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.limit == nil {
		return "", time.Time{}, "", false
	}
	return p.limit.id, p.limit.until, p.limit.notice, true
}

// readTail returns the last max bytes of a file (nil when unreadable).
func readTail(path string, max int64) []byte {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil && fi.Size() > max {
		if _, err := f.Seek(fi.Size()-max, io.SeekStart); err != nil {
			return nil
		}
	}
	b, _ := io.ReadAll(io.LimitReader(f, max))
	return b
}
