package crontab

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/decreehq/decree/pkg/fsutil"
)

// StateFile is the scheduler's record in .decree/, one entry per cron file.
const StateFile = "cron-state.json"

// fileState is what the scheduler remembers of one cron file.
type fileState struct {
	// LastFire is the latest scheduled fire handled: fired, skipped or
	// passed over. The next fire is the schedule's first after it.
	LastFire time.Time `json:"last_fire"`
	// LastRun is when a fire last put a message into the inbox.
	LastRun time.Time `json:"last_run,omitzero"`
	// Message is the inbox file that fire created.
	Message string `json:"message,omitempty"`
	// Pending is the file a fire is creating: recorded before the message
	// is written, cleared after, so a crash in between is finished on the
	// next tick without writing the message twice.
	Pending     string    `json:"pending,omitempty"`
	PendingFire time.Time `json:"pending_fire,omitzero"`
}

// state is the whole record.
type state struct {
	Files map[string]*fileState `json:"files"`
}

func loadState(path string) (*state, error) {
	st := &state{Files: map[string]*fileState{}}
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return st, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read cron state %s: %w", path, err)
	}
	if err := json.Unmarshal(data, st); err != nil {
		return nil, fmt.Errorf("read cron state %s: %w; remove the file to start afresh (fires are then counted from now)", path, err)
	}
	if st.Files == nil {
		st.Files = map[string]*fileState{}
	}
	return st, nil
}

// save writes the record crash-safely (temporary file, fsync, rename, fsync
// of the directory): a fire recorded here is never repeated.
func (s *state) save(path string) error {
	data, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	if err := fsutil.WriteFileAtomic(path, append(data, '\n'), 0o644); err != nil {
		return fmt.Errorf("record cron fires in %s: %w", filepath.Base(path), err)
	}
	return nil
}
