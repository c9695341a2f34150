package store

import (
	"os"
	"time"

	"github.com/decreehq/decree/pkg/layout"
)

// DeadStats counts the messages in inbox/dead/ and returns when the oldest
// was dead-lettered: the time its note records, else the message file's
// modification time (zero when there is no dead letter).
func (s *Store) DeadStats() (count int, oldest time.Time, err error) {
	dead, err := s.ListDead()
	if err != nil {
		return 0, time.Time{}, err
	}
	for _, d := range dead {
		when := d.Note.Time
		if when.IsZero() {
			if fi, err := os.Stat(s.path(layout.Dead, d.File)); err == nil {
				when = fi.ModTime()
			}
		}
		if !when.IsZero() && (oldest.IsZero() || when.Before(oldest)) {
			oldest = when
		}
	}
	return len(dead), oldest, nil
}
