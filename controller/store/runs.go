package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/decreehq/decree/controller/msgstate"
	"github.com/decreehq/decree/pkg/fsutil"
	"github.com/decreehq/decree/pkg/layout"
	"github.com/decreehq/decree/pkg/message"
	"github.com/decreehq/decree/pkg/usage"
)

// Attempt status values in state.json.
const (
	AttemptRunning   = "running"
	AttemptSucceeded = "succeeded"
	AttemptFailed    = "failed"
	// AttemptInterrupted is an attempt stopped because its controller
	// shut down (Ctrl-C of decreectl, SIGTERM): not a failure of the
	// message. Its partial changes stay in the tree; the next controller
	// that processes the message goes on with the next attempt.
	AttemptInterrupted = "interrupted"
)

// Run outcomes in state.json and run.json.
const (
	OutcomeSucceeded    = "succeeded"
	OutcomeDeadLettered = "dead_lettered"
	OutcomeCancelled    = "cancelled"
)

// CheckID validates a message id, "<chain>-<seq>", as it arrives from a
// client or a worker.
func CheckID(id string) error {
	if _, _, ok := message.SplitID(id); !ok {
		return fmt.Errorf("%w: %q is not a message id (expected <16-digit chain>-<seq>, such as 2025022514320000-0)", fsutil.ErrUnsafePath, id)
	}
	return nil
}

var streamRe = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,31}$`)

// CheckStream validates a log stream name ("routine", "papermill", "hook",
// "router", ...): lower-case letters, digits, '_' and '-', at most 32.
func CheckStream(stream string) error {
	if !streamRe.MatchString(stream) {
		return fmt.Errorf("%w: log stream %q is not a plain lower-case name (letters, digits, '_', '-')", fsutil.ErrUnsafePath, stream)
	}
	return nil
}

// RunDir is the absolute run directory of a message id.
func (s *Store) RunDir(id string) (string, error) {
	if err := CheckID(id); err != nil {
		return "", err
	}
	return s.path(layout.Runs, id), nil
}

// LogPath is the absolute path of a stream's log for one attempt of a
// message. It validates every part, so it is safe for values from outside.
func (s *Store) LogPath(id string, attempt int, stream string) (string, error) {
	dir, err := s.RunDir(id)
	if err != nil {
		return "", err
	}
	if err := CheckStream(stream); err != nil {
		return "", err
	}
	if attempt < 1 {
		return "", fmt.Errorf("log of %s: attempt %d is not a positive number", id, attempt)
	}
	return filepath.Join(dir, layout.LogName(stream, attempt)), nil
}

// RunState is runs/<id>/state.json: the controller's bookkeeping of a
// message's processing, written atomically after every change.
type RunState struct {
	MessageID string `json:"message_id"`
	// File is the message's inbox file name.
	File      string `json:"file"`
	Routine   string `json:"routine,omitempty"`
	Trigger   string `json:"trigger,omitempty"`
	Migration string `json:"migration,omitempty"`
	// Lane is the parallel lane the message ran in: its tree was the
	// lane's, not the project's, and it reached the project by a merge.
	Lane string `json:"lane,omitempty"`
	// MaxAttempts is the number of attempts allowed.
	MaxAttempts int       `json:"max_attempts"`
	Started     time.Time `json:"started"`
	// Attempts are oldest first; the last one with Status "running" was
	// under way when the controller stopped, if it is still running.
	Attempts []AttemptState `json:"attempts"`
	// Outcome is empty while the message is being processed.
	Outcome  string    `json:"outcome,omitempty"`
	ExitCode int       `json:"exit_code"`
	Ended    time.Time `json:"ended,omitzero"`
	// Phase is read from state files of older versions only ("succeeded",
	// "exhausted", "reverted"); the state machine (Machine) says it now.
	Phase string `json:"phase,omitempty"`
	// Machine is the message's state machine value (package msgstate),
	// recorded before each step's effect.
	Machine msgstate.Msg `json:"machine"`
	// Reruns are the tries of attempts that were interrupted and ran
	// again, oldest first (their logs are interrupted-K.<log name>).
	Reruns []AttemptState `json:"reruns,omitempty"`
	// History lists the machine's last transitions, oldest first
	// ("running(1) -> finished(1, failed)"), so that a refused step can
	// say how the message got where it is.
	History []string `json:"history,omitempty"`
	// Usage is what the message's AI calls cost so far, all attempts
	// together (usage.go); MaxCostUSD the budget that applies (0: none).
	Usage      *usage.Totals `json:"usage,omitempty"`
	MaxCostUSD float64       `json:"max_cost_usd,omitempty"`
}

// AttemptState is one attempt in state.json.
type AttemptState struct {
	N        int       `json:"attempt"`
	Status   string    `json:"status"`
	ExitCode int       `json:"exit_code"`
	Error    string    `json:"error,omitempty"`
	Start    time.Time `json:"start"`
	End      time.Time `json:"end,omitzero"`
	WorkerID string    `json:"worker_id,omitempty"`
	LogName  string    `json:"log_name"`
	// Usage is what the attempt's AI calls cost (its usage file).
	Usage *usage.Totals `json:"usage,omitempty"`
}

// RunStart describes a message whose processing begins.
type RunStart struct {
	Entry       Entry
	Routine     string
	Trigger     string
	Migration   string
	MaxAttempts int
	// Lane is the parallel lane the message runs in ("" outside lanes).
	Lane string
}

// Run is a message's run directory and its state.json. Its methods are
// safe for concurrent use.
type Run struct {
	s   *Store
	id  string
	dir string

	mu    sync.Mutex
	state RunState
	// unsynced lists the paths written since the last Commit (see Commit).
	unsynced map[string]bool
	// before is what the chain's earlier messages cost, read once (see
	// chainUsage).
	before     usage.Totals
	beforeOnce sync.Once
}

// StartRun opens the run directory of a message whose processing begins.
//
// When runs/<id>/ holds an unfinished state (the controller stopped during
// processing), that state is loaded and returned as it is: the caller sees
// the attempts made so far (see Run.Interrupted). When it holds a finished
// run (the message was dead-lettered and requeued), the old directory is
// renamed to runs/<id>.prev-N/ and a fresh one is made. A fresh directory
// gets message.md (the normalised message) and state.json.
func (s *Store) StartRun(start RunStart) (*Run, error) {
	e := start.Entry
	dir, err := s.RunDir(e.ID)
	if err != nil {
		return nil, fmt.Errorf("start run: %w", err)
	}
	if e.Message == nil {
		return nil, fmt.Errorf("start run %s: the entry has no parsed message", e.ID)
	}
	r := &Run{s: s, id: e.ID, dir: dir}
	st, err := readState(dir)
	switch {
	case err == nil && st.Outcome == "":
		r.state = st
		// Registered already, unless a version without the registry
		// started it.
		if _, err := s.markOpen(e.ID); err != nil {
			return nil, fmt.Errorf("start run %s: %w", e.ID, err)
		}
		return r, nil
	case err == nil:
		if err := s.archiveRun(e.ID); err != nil {
			return nil, err
		}
	case !errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("start run %s: %w", e.ID, err)
	}
	// Registered as open before its first state exists (openruns.go),
	// and durable with the first Commit.
	marker, err := s.markOpen(e.ID)
	if err != nil {
		return nil, fmt.Errorf("start run %s: %w", e.ID, err)
	}
	if marker != "" {
		r.markUnsynced(marker)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("start run %s: create %s: %w", e.ID, dir, err)
	}
	if err := s.writeRunMessage(dir, e); err != nil {
		return nil, fmt.Errorf("start run %s: %w", e.ID, err)
	}
	// The new directory's entry in runs/ and message.md become durable
	// with the first Commit.
	r.markUnsynced(dir)
	r.markUnsynced(filepath.Join(dir, layout.MessageFile))
	r.state = RunState{
		MessageID:   e.ID,
		File:        e.File,
		Routine:     start.Routine,
		Trigger:     start.Trigger,
		Migration:   start.Migration,
		MaxAttempts: start.MaxAttempts,
		Lane:        start.Lane,
		Started:     s.now(),
		Attempts:    []AttemptState{},
	}
	defer s.runChanged(e.ID, true)
	r.mu.Lock()
	err = r.saveLocked(r.state)
	r.mu.Unlock()
	if err != nil {
		return nil, err
	}
	return r, nil
}

// archiveRun renames runs/<id>/ to the first free runs/<id>.prev-N/.
func (s *Store) archiveRun(id string) error {
	for n := 1; ; n++ {
		dst := s.path(layout.Runs, id+".prev-"+strconv.Itoa(n))
		if _, err := os.Lstat(dst); err == nil {
			continue
		}
		if err := fsutil.MoveFile(s.path(layout.Runs, id), dst); err != nil {
			return fmt.Errorf("start run %s: keep the earlier run: %w", id, err)
		}
		return nil
	}
}

// OpenRun opens an existing run directory (for reading or resuming).
func (s *Store) OpenRun(id string) (*Run, error) {
	dir, err := s.RunDir(id)
	if err != nil {
		return nil, err
	}
	s.runReads.Add(1)
	st, err := readState(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w: no run %s", ErrNotFound, id)
	}
	if err != nil {
		return nil, fmt.Errorf("open run %s: %w", id, err)
	}
	return &Run{s: s, id: id, dir: dir, state: st}, nil
}

// InterruptedAttempt returns the number of the last attempt of message id
// when that attempt did not end (it was interrupted by a shutdown, or the
// controller died during it); false when the message has no run or its
// last attempt ended.
//
// Answers are cached per message until its run changes, so listing a long
// queue does not read a state file per message every time.
func (s *Store) InterruptedAttempt(id string) (int, bool) {
	s.cacheMu.Lock()
	n, known := s.interrupted[id]
	s.cacheMu.Unlock()
	if known {
		return n, n > 0
	}
	if dir, err := s.RunDir(id); err == nil {
		if st, err := readState(dir); err == nil && st.Outcome == "" {
			if a, ok := interruptedAttempt(st); ok {
				n = a.N
			}
		}
	}
	s.cacheMu.Lock()
	if s.interrupted == nil || len(s.interrupted) > 100000 {
		s.interrupted = map[string]int{}
	}
	s.interrupted[id] = n
	s.cacheMu.Unlock()
	return n, n > 0
}

// runChanged forgets what InterruptedAttempt knows of run id and notes
// whether the run is open (has no outcome yet).
func (s *Store) runChanged(id string, open bool) {
	s.cacheMu.Lock()
	delete(s.interrupted, id)
	if s.open != nil {
		if open {
			s.open[id] = true
		} else {
			delete(s.open, id)
		}
	}
	s.cacheMu.Unlock()
}

// openRunsLocked returns the ids of runs without an outcome (or whose
// state cannot be read: when in doubt, open): runs/ is scanned once, then
// the store's own run writes keep the set current.
func (s *Store) openRunsLocked() map[string]bool {
	s.cacheMu.Lock()
	scanned := s.open != nil
	s.cacheMu.Unlock()
	if !scanned {
		open := s.scanOpenRuns()
		s.cacheMu.Lock()
		if s.open == nil {
			s.open = open
		}
		s.cacheMu.Unlock()
	}
	s.cacheMu.Lock()
	defer s.cacheMu.Unlock()
	out := make(map[string]bool, len(s.open))
	for id := range s.open {
		out[id] = true
	}
	return out
}

// UnfinishedRuns returns the ids of runs without an outcome, and of runs
// whose state.json cannot be read, in no particular order. Only the first
// call reads runs/; the store's own writes keep the answer current.
func (s *Store) UnfinishedRuns() []string {
	open := s.openRunsLocked()
	out := make([]string, 0, len(open))
	for id := range open {
		out = append(out, id)
	}
	return out
}

func readState(dir string) (RunState, error) {
	// state.json is replaced by rename: a read sees one complete version.
	var st RunState
	data, err := os.ReadFile(filepath.Join(dir, layout.StateFile))
	if err != nil {
		return st, err
	}
	if err := json.Unmarshal(data, &st); err != nil {
		return RunState{}, fmt.Errorf("%w: %s of run %s cannot be read (%v); move the run directory away to start the message afresh", ErrDamaged, layout.StateFile, filepath.Base(dir), err)
	}
	return st, nil
}

// ID is the message id.
func (r *Run) ID() string { return r.id }

// Dir is the absolute run directory.
func (r *Run) Dir() string { return r.dir }

// Path is the absolute path of a file in the run directory. name must be a
// plain file name.
func (r *Run) Path(name string) (string, error) {
	if err := fsutil.CheckName("run file", name); err != nil {
		return "", err
	}
	return filepath.Join(r.dir, name), nil
}

// WriteFile writes an artifact (failure-context.md, changes.diff, ...) into
// the run directory atomically.
func (r *Run) WriteFile(name string, data []byte) error {
	p, err := r.Path(name)
	if err != nil {
		return err
	}
	if err := fsutil.ReplaceFileUnsynced(p, data, 0o644); err != nil {
		return err
	}
	r.markUnsynced(p)
	return nil
}

// Written records that the run file name was written (or linked) by other
// means without an fsync, for the next Commit to make durable.
func (r *Run) Written(name string) error {
	p, err := r.Path(name)
	if err != nil {
		return err
	}
	r.markUnsynced(p)
	return nil
}

func (r *Run) markUnsynced(path string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.markUnsyncedLocked(path)
}

func (r *Run) markUnsyncedLocked(path string) {
	if r.unsynced == nil {
		r.unsynced = map[string]bool{}
	}
	r.unsynced[path] = true
}

// Commit makes every run file written since the last Commit durable
// against a power failure (one fsync per file and one of the directory).
//
// Durability policy: state.json and the run's artifacts are replaced by
// rename without an fsync each time they change, which is atomic against
// a crash of decree itself (kill -9, OOM: the kernel keeps what was
// written), and made durable in one batch at the points where something
// outside the run directory starts to depend on them: before a routine or
// hook runs (Commit by the processing loop), before the tree is reverted,
// and when the run finishes (Finish). A power failure in between loses
// at most the steps since the last Commit, which the loop redoes from the
// last durable state exactly as after a crash during those steps.
func (r *Run) Commit() error {
	r.mu.Lock()
	paths := make([]string, 0, len(r.unsynced))
	for p := range r.unsynced {
		paths = append(paths, p)
	}
	r.unsynced = nil
	r.mu.Unlock()
	if len(paths) == 0 {
		return nil
	}
	sort.Strings(paths)
	if err := fsutil.SyncFiles(paths...); err != nil {
		r.mu.Lock()
		for _, p := range paths {
			r.markUnsyncedLocked(p)
		}
		r.mu.Unlock()
		return fmt.Errorf("make run %s durable: %w", r.id, err)
	}
	return nil
}

// State returns a copy of the current state.
func (r *Run) State() RunState {
	r.mu.Lock()
	defer r.mu.Unlock()
	return cloneState(r.state)
}

func cloneState(st RunState) RunState {
	st.Attempts = append([]AttemptState(nil), st.Attempts...)
	st.History = append([]string(nil), st.History...)
	return st
}

// Update applies fn to a copy of the state and persists the result; the
// in-memory state changes only when the write succeeded.
func (r *Run) Update(fn func(*RunState) error) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	st := cloneState(r.state)
	if err := fn(&st); err != nil {
		return err
	}
	defer func() { r.s.runChanged(r.id, r.state.Outcome == "") }()
	if err := r.saveLocked(st); err != nil {
		return err
	}
	r.state = st
	return nil
}

// saveLocked replaces state.json (atomically, without an fsync: see
// Commit).
func (r *Run) saveLocked(st RunState) error {
	data, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return fmt.Errorf("save run state %s: %w", r.id, err)
	}
	p := filepath.Join(r.dir, layout.StateFile)
	if err := fsutil.ReplaceFileUnsynced(p, append(data, '\n'), 0o644); err != nil {
		return fmt.Errorf("save run state %s: %w", r.id, err)
	}
	r.markUnsyncedLocked(p)
	return nil
}

// Step applies a transition of the message's state machine and records
// the result in state.json before returning, so the caller performs the
// step's effect only once it is recorded. A state.json written before the
// machine existed starts from a queued message.
func (r *Run) Step(tr func(msgstate.Msg) (msgstate.Msg, error)) (msgstate.Msg, error) {
	var out msgstate.Msg
	err := r.Update(func(st *RunState) (err error) {
		out, err = r.applyStep(st, tr)
		return err
	})
	return out, err
}

// Stage applies a transition like Step but only in memory: it is written
// with the next change that is persisted. For a step without an effect of
// its own, immediately followed by one that is persisted (a crash in
// between is a crash before the staged step).
func (r *Run) Stage(tr func(msgstate.Msg) (msgstate.Msg, error)) (msgstate.Msg, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	st := cloneState(r.state)
	out, err := r.applyStep(&st, tr)
	if err != nil {
		return out, err
	}
	r.state = st
	return out, nil
}

func (r *Run) applyStep(st *RunState, tr func(msgstate.Msg) (msgstate.Msg, error)) (msgstate.Msg, error) {
	m := st.Machine
	if m.State == "" {
		m = msgstate.New(r.id)
	}
	next, err := tr(m)
	if err != nil {
		return m, err
	}
	if from, to := describe(m), describe(next); from != to {
		st.History = append(st.History, from+" -> "+to)
		if len(st.History) > historyLen {
			st.History = append([]string(nil), st.History[len(st.History)-historyLen:]...)
		}
	}
	st.Machine = next
	if next.Max > st.MaxAttempts {
		st.MaxAttempts = next.Max // a usage limit gave one more
	}
	return next, nil
}

// historyLen is how many transitions state.json keeps.
const historyLen = 32

// describe renders a machine value for the history.
func describe(m msgstate.Msg) string {
	s := string(m.State)
	switch m.State {
	case msgstate.Running, msgstate.Interrupted:
		s += fmt.Sprintf("(%d/%d)", m.Attempt, m.Max)
	case msgstate.Finished:
		how := "failed"
		switch {
		case m.OK && m.Collected:
			how = "ok, collected"
		case m.OK:
			how = "ok"
		case m.OverBudget:
			how = "over budget"
		case m.Limit != nil && m.Limit.Attempt == m.Attempt:
			how = "usage limit"
		case m.Blocked:
			how = "blocked by beforeEach"
		}
		s += fmt.Sprintf("(%d/%d, %s)", m.Attempt, m.Max, how)
	case msgstate.Reverting:
		s += "(" + string(m.Why) + ")"
	case msgstate.Waiting:
		if m.Wait != nil {
			s += fmt.Sprintf("(%d, %s %s", m.Attempt, m.Wait.Kind, m.Wait.ID)
			if m.Wait.Reply != "" {
				s += ": " + m.Wait.Reply
			}
			s += ")"
		}
	case msgstate.Dead:
		s += "(" + string(m.Reason) + ")"
	case msgstate.Done:
		if m.Reverted {
			s += "(reverted)"
		}
	}
	if m.Cancel != "" && !m.Final() {
		s += " cancel requested"
	}
	return s
}

// Machine returns the recorded state machine value (a queued message
// when none is recorded yet).
func (r *Run) Machine() msgstate.Msg {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.state.Machine.State == "" {
		return msgstate.New(r.id)
	}
	return r.state.Machine
}

// Interrupted returns the last attempt when it did not end: it is still
// marked running (the controller died while it was under way) or was
// recorded as interrupted (the controller shut down).
func (r *Run) Interrupted() (AttemptState, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return interruptedAttempt(r.state)
}

func interruptedAttempt(st RunState) (AttemptState, bool) {
	n := len(st.Attempts)
	if n == 0 || (st.Attempts[n-1].Status != AttemptRunning && st.Attempts[n-1].Status != AttemptInterrupted) {
		return AttemptState{}, false
	}
	return st.Attempts[n-1], true
}

// InterruptAttempt records that attempt n was stopped because the
// controller shut down (AttemptInterrupted), with why.
func (r *Run) InterruptAttempt(n int, why string) error {
	return r.Update(func(st *RunState) error {
		if n < 1 || n > len(st.Attempts) {
			return fmt.Errorf("run %s has no attempt %d", r.id, n)
		}
		a := &st.Attempts[n-1]
		a.Status, a.Error, a.End = AttemptInterrupted, why, r.s.now()
		return nil
	})
}

// BeginAttempt records the start of the next attempt.
func (r *Run) BeginAttempt() (AttemptState, error) {
	return r.BeginAttemptStep(nil)
}

// BeginAttemptStep records the start of the next attempt together with
// the transition tr of the state machine (nil: none), in one write.
func (r *Run) BeginAttemptStep(tr func(msgstate.Msg) (msgstate.Msg, error)) (AttemptState, error) {
	var a AttemptState
	err := r.Update(func(st *RunState) error {
		var v msgstate.Msg
		if tr != nil {
			var err error
			if v, err = r.applyStep(st, tr); err != nil {
				return err
			}
		}
		n := len(st.Attempts)
		if last, open := interruptedAttempt(*st); open {
			if tr == nil || last.Status != AttemptInterrupted || v.State != msgstate.Running || v.Attempt != last.N {
				return fmt.Errorf("begin attempt of %s: attempt %d is still running; finish it first", r.id, n)
			}
			// The interrupted attempt runs again: it keeps its number, and
			// the interrupted try moves to Reruns.
			st.Reruns = append(st.Reruns, last)
			a = AttemptState{N: last.N, Status: AttemptRunning, ExitCode: -1, Start: r.s.now(), LogName: layout.LogName("routine", last.N)}
			st.Attempts[n-1] = a
			return nil
		}
		a = AttemptState{N: n + 1, Status: AttemptRunning, ExitCode: -1, Start: r.s.now(), LogName: layout.LogName("routine", n+1)}
		st.Attempts = append(st.Attempts, a)
		return nil
	})
	return a, err
}

// SetAttemptWorker records which worker runs attempt n. It is kept in
// memory and persisted with the next state change (FinishAttempt): the
// worker id is informational, not needed to resume after a crash.
func (r *Run) SetAttemptWorker(n int, workerID string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if n < 1 || n > len(r.state.Attempts) {
		return fmt.Errorf("run %s has no attempt %d", r.id, n)
	}
	st := cloneState(r.state)
	st.Attempts[n-1].WorkerID = workerID
	r.state = st
	return nil
}

// FinishAttempt records how attempt n ended. exitCode 0 with errText ""
// means success.
func (r *Run) FinishAttempt(n, exitCode int, errText string) error {
	_, err := r.FinishAttemptStep(n, exitCode, errText, nil)
	return err
}

// FinishAttemptStep records how attempt n ended together with the
// transition tr of the state machine (nil: none), in one write. It returns
// the machine's value after tr.
func (r *Run) FinishAttemptStep(n, exitCode int, errText string, tr func(msgstate.Msg) (msgstate.Msg, error)) (msgstate.Msg, error) {
	var out msgstate.Msg
	err := r.Update(func(st *RunState) error {
		out = st.Machine
		if tr != nil {
			var err error
			if out, err = r.applyStep(st, tr); err != nil {
				return err
			}
		}
		if n < 1 || n > len(st.Attempts) {
			return fmt.Errorf("run %s has no attempt %d", r.id, n)
		}
		a := &st.Attempts[n-1]
		a.ExitCode = exitCode
		a.Error = errText
		a.End = r.s.now()
		a.Status = AttemptFailed
		if exitCode == 0 && errText == "" {
			a.Status = AttemptSucceeded
		}
		st.ExitCode = exitCode
		return nil
	})
	return out, err
}

// Finish records the outcome (OutcomeSucceeded, OutcomeDeadLettered or
// OutcomeCancelled) in state.json and writes run.json. It returns what was
// written to run.json.
func (r *Run) Finish(outcome string) (RunRecord, error) {
	switch outcome {
	case OutcomeSucceeded, OutcomeDeadLettered, OutcomeCancelled:
	default:
		return RunRecord{}, fmt.Errorf("finish run %s: unknown outcome %q", r.id, outcome)
	}
	if err := r.Update(func(st *RunState) error {
		st.Outcome = outcome
		st.Ended = r.s.now()
		return nil
	}); err != nil {
		return RunRecord{}, err
	}
	rec := r.Record()
	data, err := json.MarshalIndent(rec, "", "  ")
	if err != nil {
		return RunRecord{}, fmt.Errorf("write run.json of %s: %w", r.id, err)
	}
	if err := r.WriteFile(layout.RunFile, append(data, '\n')); err != nil {
		return RunRecord{}, fmt.Errorf("write run.json of %s: %w", r.id, err)
	}
	// One batch of fsyncs makes the whole run durable: state.json,
	// run.json, the diffs and the directory.
	if err := r.Commit(); err != nil {
		return RunRecord{}, err
	}
	r.s.unregister(r.id)
	return rec, nil
}

// Artifacts lists the files in the run directory (state.json excluded,
// temporary files skipped), sorted.
func (r *Run) Artifacts() ([]string, error) {
	ents, err := os.ReadDir(r.dir)
	if err != nil {
		return nil, fmt.Errorf("list run directory %s: %w", r.dir, err)
	}
	var out []string
	for _, e := range ents {
		if e.IsDir() || isTemp(e.Name()) || e.Name() == layout.StateFile {
			continue
		}
		out = append(out, e.Name())
	}
	sort.Strings(out)
	return out, nil
}
