// Package crontab fires the scheduled messages of .decree/cron/: each file
// is a message with a `cron:` schedule in its frontmatter (see pkg/cron for
// the syntax and the daylight-saving rules). Each fire puts a copy of the
// file into the inbox, without the scheduling fields (cron, catch_up) and
// with `trigger: cron:<stem>`, and the processing loop runs it like any
// other message.
//
// Rules:
//
//   - Zone: a CRON_TZ= prefix of the schedule, else time_zone in
//     config.yml, else the controller's local zone.
//   - A file seen for the first time counts from then: it never fires for
//     times before it was seen.
//   - A fire that comes while the message of the file's previous fire is
//     still in the inbox (queued or running) is skipped and logged.
//   - Fires are recorded in .decree/cron-state.json before the message is
//     written, crash-safely, so a restarted controller never fires the same
//     minute twice. A crash between the record and the message is finished
//     on the next tick, without a second message.
//   - Downtime: a fire found less than Grace late runs. Fires missed for
//     longer run only with `catch_up: true` in the file, and then only one
//     (the latest). Every fire passed over is reported: one log line and
//     one warning event per tick and file, with the count, the first and
//     the last missed minute (also the minute before a fire that runs
//     after more than a minute of downtime).
//   - A file that cannot be read (bad frontmatter, no or an invalid
//     schedule) is reported, with file and line, when it changes and is
//     otherwise ignored; the other files run.
package crontab

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/decreehq/decree/controller/events"
	"github.com/decreehq/decree/controller/store"
	"github.com/decreehq/decree/pkg/config"
	"github.com/decreehq/decree/pkg/cron"
	"github.com/decreehq/decree/pkg/layout"
	"github.com/decreehq/decree/pkg/message"
)

// Dir is the cron directory inside .decree/.
const Dir = "cron"

// Grace is how late a fire may be found and still run without catch_up.
const Grace = time.Minute

// Options configure a Scheduler.
type Options struct {
	Store *store.Store
	// Config loads config.yml (time_zone, default_routine).
	Config func() (*config.Config, error)
	Logger *slog.Logger
	// Now is the clock (time.Now when nil).
	Now func() time.Time
	// Wake tells the processing loop a message arrived (optional).
	Wake func()
	// Emit records an event (optional): fires, skips, broken files.
	Emit func(*events.Event)
}

// Scheduler fires the cron files of one project. Tick does one pass; Run
// ticks until its context ends. Methods are safe for concurrent use.
type Scheduler struct {
	opts Options
	log  *slog.Logger
	path string

	mu       sync.Mutex
	st       *state
	reported map[string]string // file -> last reported problem
}

// New loads the scheduler's record.
func New(opts Options) (*Scheduler, error) {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Wake == nil {
		opts.Wake = func() {}
	}
	if opts.Emit == nil {
		opts.Emit = func(*events.Event) {}
	}
	path := filepath.Join(opts.Store.Dir(), StateFile)
	st, err := loadState(path)
	if err != nil {
		return nil, err
	}
	return &Scheduler{opts: opts, log: opts.Logger, path: path, st: st, reported: map[string]string{}}, nil
}

// Run ticks every interval (at most a second apart) until ctx ends.
func (s *Scheduler) Run(ctx context.Context, interval time.Duration) {
	if interval <= 0 || interval > time.Second {
		interval = time.Second
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	last := "" // an error repeated every tick is logged once
	for {
		err := s.Tick(ctx)
		switch {
		case err != nil && err.Error() != last:
			s.log.Error("cron", "err", err)
			last = err.Error()
		case err == nil && last != "":
			s.log.Info("cron recovered")
			last = ""
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// loaded is one file of the cron directory: an entry or a problem.
type loaded struct {
	file  string
	entry *cron.Entry
	err   error
}

// load reads every cron file; problems are returned per file.
func (s *Scheduler) load() ([]loaded, *config.Config, error) {
	cfg, err := s.opts.Config()
	if err != nil {
		return nil, nil, fmt.Errorf("cron: load config.yml: %w", err)
	}
	loc, err := cfg.Location()
	if err != nil {
		return nil, nil, fmt.Errorf("cron: %w", err)
	}
	dir := filepath.Join(s.opts.Store.Dir(), Dir)
	ents, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, cfg, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("cron: list %s: %w", dir, err)
	}
	var out []loaded
	for _, de := range ents {
		name := de.Name()
		if de.IsDir() || !strings.HasSuffix(name, ".md") || strings.HasPrefix(name, ".") {
			continue
		}
		l := loaded{file: name}
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			l.err = fmt.Errorf("%s: %w", name, err)
		} else {
			l.entry, l.err = cron.ParseFile(name, data, loc)
		}
		out = append(out, l)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].file < out[j].file })
	return out, cfg, nil
}

// Tick fires every cron file that is due now.
func (s *Scheduler) Tick(ctx context.Context) error {
	files, _, err := s.load()
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.opts.Now()
	present := map[string]bool{}
	var errs []error
	for _, l := range files {
		present[l.file] = true
		if l.err != nil {
			s.report(l.file, l.err)
			continue
		}
		delete(s.reported, l.file)
		if err := s.tickFile(l.entry, now); err != nil {
			errs = append(errs, err)
		}
	}
	for f := range s.reported {
		if !present[f] {
			delete(s.reported, f)
		}
	}
	return errors.Join(errs...)
}

// report logs a broken file once per distinct problem.
func (s *Scheduler) report(file string, err error) {
	text := err.Error()
	if s.reported[file] == text {
		return
	}
	s.reported[file] = text
	s.log.Warn("cron file ignored", "file", file, "err", text)
	s.opts.Emit(&events.Event{Kind: events.Warning,
		Text: fmt.Sprintf("cron file .decree/cron/%s ignored: %s", file, text)})
}

// tickFile handles one valid file at now.
func (s *Scheduler) tickFile(e *cron.Entry, now time.Time) error {
	rec := s.st.Files[e.File]
	if rec == nil {
		s.st.Files[e.File] = &fileState{LastFire: now}
		return s.st.save(s.path)
	}
	if rec.Pending != "" {
		if err := s.create(e, rec, rec.PendingFire, rec.Pending, now); err != nil {
			return err
		}
	}
	due := e.Schedule.Next(rec.LastFire)
	if due.IsZero() || due.After(now) {
		return nil
	}
	fire := e.Schedule.Latest(rec.LastFire, now)
	late := now.Sub(fire)
	runs := late < Grace || e.CatchUp
	s.reportMissed(e, due, fire, runs)
	rec.LastFire = fire
	if !runs {
		return s.st.save(s.path)
	}
	if rec.Message != "" && s.queued(rec.Message) {
		text := fmt.Sprintf("cron:%s fire at %s skipped: its previous message %s is still queued or running",
			e.Stem, fire.Format("2006-01-02 15:04 MST"), rec.Message)
		s.log.Warn(text)
		s.opts.Emit(&events.Event{Kind: events.Warning, Text: text})
		return s.st.save(s.path)
	}
	return s.create(e, rec, fire, "", now)
}

// maxMissedCount bounds the count of missed fires reportMissed makes (an
// every-minute schedule down for a year has half a million).
const maxMissedCount = 100_000

// reportMissed logs and records as a warning event the fires from first to
// last (inclusive; last runs when runs is true, so it is not missed) that
// came while the controller was down, with their count, the first and the
// last. Nothing is reported when no fire was missed.
func (s *Scheduler) reportMissed(e *cron.Entry, first, last time.Time, runs bool) {
	n, more := 0, false
	lastMissed := time.Time{}
	for t := first; !t.IsZero() && !t.After(last); t = e.Schedule.Next(t) {
		if runs && t.Equal(last) {
			break
		}
		if n == maxMissedCount {
			more = true
			break
		}
		n++
		lastMissed = t
	}
	if n == 0 {
		return
	}
	zone := e.Schedule.Location()
	count := fmt.Sprint(n)
	if more {
		count = "more than " + count
	}
	what := "fire"
	if n != 1 || more {
		what = "fires"
	}
	span := first.In(zone).Format("2006-01-02 15:04 MST")
	if n > 1 || more {
		span = "from " + span + " to " + lastMissed.In(zone).Format("2006-01-02 15:04 MST")
	} else {
		span = "at " + span
	}
	hint := "add catch_up: true to the file to run one after downtime"
	if runs {
		hint = "the latest one runs"
		if e.CatchUp {
			hint = "catch_up runs only the latest"
		}
	}
	text := fmt.Sprintf("cron:%s missed %s %s %s while the controller was down; %s", e.Stem, count, what, span, hint)
	s.log.Warn("cron fires missed while the controller was down", "file", e.File, "missed", count,
		"first", first.Format(time.RFC3339), "last", lastMissed.Format(time.RFC3339), "runs_latest", runs)
	s.opts.Emit(&events.Event{Kind: events.Warning, Text: text})
}

// queued reports whether an inbox file is still waiting or running.
func (s *Scheduler) queued(file string) bool {
	_, err := os.Lstat(filepath.Join(s.opts.Store.Dir(), layout.Inbox, file))
	return err == nil
}

// fireName is the message name of a fire: the stem and the fire's minute
// in the schedule's zone, so that a repeated creation is recognisable.
func fireName(e *cron.Entry, fire time.Time) string {
	stem := message.KebabName(e.Stem)
	if stem == "" {
		stem = "cron"
	}
	suffix := fire.In(e.Schedule.Location()).Format("-20060102-1504")
	if max := message.MaxNameLen - len(suffix); len(stem) > max {
		stem = strings.TrimRight(stem[:max], "-")
	}
	return stem + suffix
}

// create records the fire, writes its message, and records the result.
// pending is the name of an interrupted creation being finished ("" for a
// new fire).
func (s *Scheduler) create(e *cron.Entry, rec *fileState, fire time.Time, pending string, now time.Time) error {
	name := pending
	if name == "" {
		name = fireName(e, fire)
		rec.Pending, rec.PendingFire = name, fire
		if err := s.st.save(s.path); err != nil {
			return err
		}
	}
	file := name + ".md"
	if !s.exists(file) {
		m := e.Message.Clone()
		m.Delete("chain")
		m.Delete("seq")
		m.Delete("id")
		m.Set("trigger", "cron:"+e.Stem)
		ent, err := s.opts.Store.CreateMessage(name, m)
		if err != nil {
			return fmt.Errorf("cron %s: queue the message of the %s fire: %w", e.File, fire.Format(time.RFC3339), err)
		}
		file = ent.File
		s.log.Info("cron fired", "file", e.File, "fire", fire.Format(time.RFC3339), "message", ent.ID)
		s.opts.Emit(&events.Event{Kind: events.MessageQueued, MessageID: ent.ID, Chain: ent.Chain,
			Text: fmt.Sprintf("cron:%s fired for %s", e.Stem, fire.In(e.Schedule.Location()).Format("2006-01-02 15:04 MST"))})
		s.opts.Wake()
	}
	rec.Pending, rec.PendingFire = "", time.Time{}
	rec.Message, rec.LastRun = file, now
	return s.st.save(s.path)
}

// exists reports whether a message file is in the inbox, done/ or dead/.
func (s *Scheduler) exists(file string) bool {
	for _, d := range []string{layout.Inbox, layout.Done, layout.Dead} {
		if _, err := os.Lstat(filepath.Join(s.opts.Store.Dir(), d, file)); err == nil {
			return true
		}
	}
	return false
}
