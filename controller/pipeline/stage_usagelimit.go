package pipeline

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/decreehq/decree/controller/events"
	"github.com/decreehq/decree/controller/msgstate"
	"github.com/decreehq/decree/pkg/config"
	"github.com/decreehq/decree/pkg/usagelimit"
)

// The usage-limit stage (see pkg/usagelimit).
//
// After a failed attempt whose log shows an AI tool's usage-limit notice,
// the stage adds the limit to the attempt's result; the state machine
// records it in the same write as the attempt's end, and the attempt does
// not count (msgstate.End raises Max by one). Before the next attempt the
// stage puts the tree back to the checkpoint and waits until the reset,
// also after a controller restart; the retry gets
// DECREE_PREVIOUS_SESSION_ID when the limited attempt printed a session
// id. The message stays in the inbox all along, so a limit never puts it
// in processed.md or dead/; a stopped controller leaves it queued, and the
// next one waits again. Every wait is capped by usage_limit.max_wait
// (24 h by default) when it is recorded and again when it is waited, and
// a message waits at most maxUsageLimitWaits times.

// maxUsageLimitWaits bounds the free retries of one message: past it a
// limited attempt counts like any failure.
const maxUsageLimitWaits = 20

// usageLimitStage is the stage; its parts are functions so that it can be
// tested without a whole loop.
type usageLimitStage struct {
	// readLog returns the end of attempt n's routine log.
	readLog func(id string, n int) []byte
	// restore puts the tree back to the message's checkpoint.
	restore func(ctx context.Context, m *msg) error
	// announce tells clients and status about a wait (done, at its end).
	announce func(ctx context.Context, m *msg, l msgstate.Limit, done bool)
	loc      func() *time.Location
	now      func() time.Time
	// sleep waits d or until ctx ends.
	sleep func(ctx context.Context, d time.Duration) error
	// warn reports a limit that no longer counts.
	warn func(ctx context.Context, id, text string)
}

func (s *usageLimitStage) maxWait(cfg *config.Config) time.Duration {
	if cfg != nil && cfg.UsageLimit.MaxWait > 0 {
		return cfg.UsageLimit.MaxWait
	}
	return config.DefaultUsageLimitMaxWait
}

// after looks for a usage-limit notice in a failed attempt's log.
func (s *usageLimitStage) after(ctx context.Context, m *msg, n int, end *attemptEnd) {
	if end.res.OK || end.res.Blocked || m.cfg == nil || m.cfg.UsageLimit.Disabled {
		return
	}
	log := s.readLog(m.e.ID, n)
	notice, ok := usagelimit.Detect(log, usagelimit.Options{Location: s.loc(), Patterns: m.cfg.UsageLimit.Patterns, MaxWait: s.maxWait(m.cfg), Now: s.now()})
	if !ok {
		return
	}
	if v := m.run.Machine(); v.Waits >= maxUsageLimitWaits {
		s.warn(ctx, m.e.ID, fmt.Sprintf("usage limit reached again after %d waits; this attempt counts as failed", v.Waits))
		return
	}
	end.res.Limit = &msgstate.Limit{Attempt: n, Until: notice.Reset, Notice: notice.Line, SessionID: usagelimit.SessionID(log)}
	end.res.MaxWaits = maxUsageLimitWaits
}

// before waits out the limit attempt n-1 hit, from the checkpoint.
func (s *usageLimitStage) before(ctx context.Context, m *msg, n int) error {
	l, ok := m.run.Machine().Waiting(n)
	if !ok {
		return nil
	}
	if err := s.restore(ctx, m); err != nil {
		return fmt.Errorf("put the tree back after a usage limit: %w", err)
	}
	if latest := s.now().Add(s.maxWait(m.cfg)); l.Until.After(latest) {
		l.Until = latest
	}
	wait := l.Until.Sub(s.now())
	if wait <= 0 {
		return nil
	}
	s.announce(ctx, m, l, false)
	defer s.announce(ctx, m, l, true)
	return s.sleep(ctx, wait)
}

// newUsageLimitStage wires the stage to the loop.
func (p *Pipeline) newUsageLimitStage() *usageLimitStage {
	return &usageLimitStage{
		readLog: func(id string, n int) []byte {
			path, err := p.d.Store.LogPath(id, n, "routine")
			if err != nil {
				return nil
			}
			return readTail(path, 256<<10)
		},
		restore: func(ctx context.Context, m *msg) error { return p.revert(ctx, m.run, m.manifest) },
		announce: func(ctx context.Context, m *msg, l msgstate.Limit, done bool) {
			p.mu.Lock()
			if done {
				p.limit = nil
				p.mu.Unlock()
				return
			}
			p.limit = &usageWait{id: m.e.ID, until: l.Until, notice: l.Notice}
			p.mu.Unlock()
			text := fmt.Sprintf("usage limit reached; waiting until %s (%s) to retry %s: %s",
				l.Until.In(p.d.Store.Location()).Format("15:04"), time.Until(l.Until).Round(time.Second), m.e.ID, l.Notice)
			p.log.Info(text) // clients print the event; a daemon logs at info level
			p.emit(ctx, &events.Event{Kind: events.UsageLimitWait, MessageID: m.e.ID, Chain: m.e.Chain,
				Attempt: l.Attempt, Until: l.Until, Text: l.Notice})
		},
		loc:   p.d.Store.Location,
		now:   time.Now,
		sleep: sleepCtx,
		warn:  p.warn,
	}
}

// sleepCtx waits d or until ctx ends (then it returns ctx's error).
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// usageWait is the wait in progress, for GetStatus.
type usageWait struct {
	id     string
	until  time.Time
	notice string
}

// resumeEnv adds DECREE_PREVIOUS_SESSION_ID to attempt n's environment
// when attempt n-1 hit a usage limit and printed a session id.
func resumeEnv(v msgstate.Msg, n int, env map[string]string) {
	if l, ok := v.Waiting(n); ok && l.SessionID != "" {
		env["DECREE_PREVIOUS_SESSION_ID"] = l.SessionID
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

var _ attemptStage = (*usageLimitStage)(nil)
