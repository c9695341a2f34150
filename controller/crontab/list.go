package crontab

import (
	"os"
	"path/filepath"
	"time"

	"github.com/decreehq/decree/pkg/message"
)

// Listing is one cron file as `decreectl cron list` shows it.
type Listing struct {
	File     string
	Schedule string
	// Routine is the file's routine:, else default_routine.
	Routine string
	// Zone is the IANA name of the zone the schedule runs in.
	Zone    string
	CatchUp bool
	// LastRun is when a fire last queued a message (zero: never).
	LastRun time.Time
	// NextRun is the next fire (zero for a broken file).
	NextRun time.Time
	// Err says why a broken file is ignored.
	Err string
}

// List describes every cron file, ordered by name, as of now.
func (s *Scheduler) List() ([]Listing, error) {
	files, cfg, err := s.load()
	if err != nil {
		return nil, err
	}
	loc, err := cfg.Location()
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.opts.Now()
	out := make([]Listing, 0, len(files))
	for _, l := range files {
		li := Listing{File: l.file, Routine: cfg.DefaultRoutine, Zone: loc.String()}
		if rec := s.st.Files[l.file]; rec != nil {
			li.LastRun = rec.LastRun
		}
		if l.err != nil {
			li.Err = l.err.Error()
			if data, err := os.ReadFile(filepath.Join(s.opts.Store.Dir(), Dir, l.file)); err == nil {
				if m, err := message.Parse(data); err == nil {
					li.Schedule = m.GetString("cron")
					if r := m.Routine(); r != "" {
						li.Routine = r
					}
				}
			}
			out = append(out, li)
			continue
		}
		e := l.entry
		li.Schedule, li.Zone, li.CatchUp = e.Schedule.String(), e.Schedule.Location().String(), e.CatchUp
		if e.Routine != "" {
			li.Routine = e.Routine
		}
		from := now
		if rec := s.st.Files[l.file]; rec != nil && rec.LastFire.After(now) {
			from = rec.LastFire
		}
		li.NextRun = e.Schedule.Next(from)
		out = append(out, li)
	}
	return out, nil
}
