package store

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/decreehq/decree/pkg/layout"
)

// The open-run registry, .decree/open-runs/, holds an empty file per run
// that has no outcome yet, named by its message id. Opening a store (a
// controller's start, status without a controller) lists that directory
// instead of reading the state of every run ever made, so its cost follows
// the runs in progress, not the project's history.
//
// Invariant: every run without an outcome has its file. StartRun creates
// the file before the run's first state.json, and it becomes durable with
// the run's first Commit; Finish removes it only once the outcome is
// durable (and, in a controller, once the run's logs are ended: see
// SetLogsEnded). The registry may therefore name a run that has finished (a
// crash between the two): readers check the state and drop such a file.
// A project made by a version without the registry is scanned once, in
// full, and the registry built from what that scan finds.

// openRunsDir is the registry's directory.
func (s *Store) openRunsDir() string { return s.path(layout.OpenRuns) }

// markOpen creates run id's registry file (no-op when it exists) and
// returns its path.
func (s *Store) markOpen(id string) (string, error) {
	// A removal still waiting for the run's logs (unregister) must not
	// remove the file of the run opened again.
	s.unregMu.Lock()
	delete(s.unregistering, id)
	s.unregMu.Unlock()
	p := filepath.Join(s.openRunsDir(), id)
	f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY, 0o644)
	if errors.Is(err, fs.ErrNotExist) {
		// The registry is missing (removed by hand): the next open
		// rebuilds it from a full scan; this run is found by that scan.
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("record run %s as open in %s: %w", id, s.openRunsDir(), err)
	}
	return p, f.Close()
}

// SetLogsEnded makes a finished run leave the open-run registry only once
// wait(runID) returned: the controller ends an attempt's logs (cuts one
// over max_log_bytes to its tail, syncs it) in the background, and a
// process killed meanwhile leaves a temporary file in the run directory.
// The start after such a kill sweeps the runs the registry names, so the
// run must still be named there. Call it before the first run finishes.
func (s *Store) SetLogsEnded(wait func(runID string)) { s.logsEnded = wait }

// unregister removes finished run id from the registry, once its logs are
// ended when SetLogsEnded asked for that (in the background; Close waits).
func (s *Store) unregister(id string) {
	if s.logsEnded == nil {
		s.markFinished(id)
		return
	}
	done := make(chan struct{})
	s.unregMu.Lock()
	if s.unregistering == nil {
		s.unregistering = map[string]chan struct{}{}
	}
	s.unregistering[id] = done
	s.unregMu.Unlock()
	go func() {
		defer close(done)
		s.logsEnded(id)
		s.unregMu.Lock()
		defer s.unregMu.Unlock()
		if s.unregistering[id] != done {
			return // the run was opened again meanwhile (markOpen)
		}
		delete(s.unregistering, id)
		s.markFinished(id)
	}()
}

// waitUnregistered waits for every unregister still under way.
func (s *Store) waitUnregistered() {
	for {
		var ch chan struct{}
		s.unregMu.Lock()
		for _, c := range s.unregistering {
			ch = c
			break
		}
		s.unregMu.Unlock()
		if ch == nil {
			return
		}
		<-ch
	}
}

// markFinished removes run id's registry file. A failure leaves a stale
// file, which readers drop, so it is only logged.
func (s *Store) markFinished(id string) {
	if err := os.Remove(filepath.Join(s.openRunsDir(), id)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		s.log.Warn("could not remove a finished run from the open-run registry; it is dropped at the next start", "run", id, "err", err)
	}
}

// scanOpenRuns returns the ids of runs without an outcome. With the
// registry present it reads only the runs the registry names (dropping
// those that finished or no longer exist); without it, it reads every
// run's state and builds the registry.
func (s *Store) scanOpenRuns() map[string]bool {
	open := map[string]bool{}
	names, err := listNames(s.openRunsDir())
	if errors.Is(err, fs.ErrNotExist) {
		return s.buildOpenRuns()
	}
	if err != nil {
		// Unreadable registry: the full scan is always right.
		s.log.Warn("open-run registry unreadable; reading every run", "dir", s.openRunsDir(), "err", err)
		return s.fullOpenScan()
	}
	for _, id := range names {
		if CheckID(id) != nil {
			continue // a temporary file or a stray name
		}
		st, err := readState(s.path(layout.Runs, id))
		switch {
		case errors.Is(err, fs.ErrNotExist):
			s.markFinished(id) // the run directory is gone (or never made)
		case err != nil || st.Outcome == "":
			open[id] = true // when in doubt, open
		default:
			s.markFinished(id)
		}
	}
	return open
}

// fullOpenScan reads the state of every run: the runs without an outcome
// (or whose state cannot be read: when in doubt, open).
func (s *Store) fullOpenScan() map[string]bool {
	open := map[string]bool{}
	names, err := listNames(s.path(layout.Runs))
	if err != nil {
		return open
	}
	for _, id := range names {
		if CheckID(id) != nil {
			continue
		}
		dir := s.path(layout.Runs, id)
		if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
			continue
		}
		if st, err := readState(dir); err != nil || st.Outcome == "" {
			open[id] = true
		}
	}
	return open
}

// buildOpenRuns makes the registry of a project that has none: a full
// scan, its open runs written into a temporary directory, which is then
// renamed into place (a concurrent builder's rename wins; the loser's copy
// is removed).
func (s *Store) buildOpenRuns() map[string]bool {
	open := s.fullOpenScan()
	tmp := s.path("." + layout.OpenRuns + ".tmp-" + strconv.FormatInt(time.Now().UnixNano(), 36))
	if err := os.Mkdir(tmp, 0o755); err != nil {
		s.log.Warn("could not build the open-run registry; runs are read in full at every start", "err", err)
		return open
	}
	for id := range open {
		if err := os.WriteFile(filepath.Join(tmp, id), nil, 0o644); err != nil {
			os.RemoveAll(tmp)
			s.log.Warn("could not build the open-run registry; runs are read in full at every start", "err", err)
			return open
		}
	}
	if err := os.Rename(tmp, s.openRunsDir()); err != nil {
		os.RemoveAll(tmp) // another process built it first
	}
	return open
}
