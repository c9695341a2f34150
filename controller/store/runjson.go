package store

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/decreehq/decree/pkg/fsutil"
	"github.com/decreehq/decree/pkg/layout"
	"github.com/decreehq/decree/pkg/message"
	"github.com/decreehq/decree/pkg/usage"
)

// RunRecord is run.json, written after every completed run (success,
// dead letter or cancel). Times carry the offset of the store's time zone
// (RFC 3339, such as "2025-02-25T14:32:00+01:00"), and time_zone names the
// zone.
type RunRecord struct {
	MessageID string `json:"message_id"`
	Routine   string `json:"routine"`
	// Trigger is "inbox", "cron:<stem>" or "chain".
	Trigger string `json:"trigger"`
	// Migration is omitted for messages that are not migrations.
	Migration   string `json:"migration,omitempty"`
	Attempts    int    `json:"attempts"`
	MaxAttempts int    `json:"max_attempts"`
	// ExitCode is the last attempt's exit code.
	ExitCode int    `json:"exit_code"`
	Outcome  string `json:"outcome"`
	Start    string `json:"start"`
	End      string `json:"end"`
	// Duration is Go's notation ("1m2.5s"); DurationMS the same in
	// milliseconds, for programs.
	Duration       string          `json:"duration"`
	DurationMS     int64           `json:"duration_ms"`
	TimeZone       string          `json:"time_zone"`
	AttemptDetails []AttemptRecord `json:"attempt_details"`
	Artifacts      []string        `json:"artifacts"`
	// Usage is what the run's AI calls cost, all attempts together;
	// omitted when none was recorded. MaxCostUSD is the budget it had.
	Usage      *usage.Totals `json:"usage,omitempty"`
	MaxCostUSD float64       `json:"max_cost_usd,omitempty"`
	// ChainUsage is what the chain cost up to and including this message:
	// the usage of the run.json of every earlier message of the chain
	// (seq 0 .. seq-1) plus this one's; omitted when none was recorded.
	ChainUsage *usage.Totals `json:"chain_usage,omitempty"`
	// Lane is the parallel lane the message ran in; Merge how its chain's
	// change reached the project tree (set when the chain was merged).
	Lane  string       `json:"lane,omitempty"`
	Merge *MergeRecord `json:"merge,omitempty"`
}

// MergeRecord is the merge of a parallel chain into the project tree, as
// run.json of each of the chain's messages records it.
type MergeRecord struct {
	// Result is "merged", "conflict" (requeued), "dead" (a second
	// conflict, or a failing beforeMerge gate) or "empty" (nothing to
	// merge).
	Result string `json:"result"`
	// Order is the merge's place in the project's merge order (1, 2, ...).
	Order int64 `json:"order,omitempty"`
	// Onto is the digest of the project tree the change was merged onto;
	// Base that of the tree the chain started from.
	Onto string `json:"onto,omitempty"`
	Base string `json:"base,omitempty"`
	// Paths are the paths the merge changed in the project tree; Conflicts
	// the conflicting paths with what each side did.
	Paths     []string `json:"paths,omitempty"`
	Conflicts []string `json:"conflicts,omitempty"`
	// RequeuedAs is the chain that runs the change again after a conflict.
	RequeuedAs string `json:"requeued_as,omitempty"`
	Time       string `json:"time"`
}

// AttemptRecord is one attempt in run.json.
type AttemptRecord struct {
	Attempt  int    `json:"attempt"`
	ExitCode int    `json:"exit_code"`
	Error    string `json:"error,omitempty"`
	Start    string `json:"start"`
	End      string `json:"end,omitempty"`
	WorkerID string `json:"worker_id,omitempty"`
	LogName  string `json:"log_name"`
	// Usage is what the attempt's AI calls cost.
	Usage *usage.Totals `json:"usage,omitempty"`
}

func fmtTime(t time.Time, loc *time.Location) string {
	if t.IsZero() {
		return ""
	}
	return t.In(loc).Format(time.RFC3339Nano)
}

// Record builds the run.json content from the current state.
func (r *Run) Record() RunRecord {
	st := r.State()
	loc := r.s.loc
	end := st.Ended
	if end.IsZero() {
		end = r.s.now()
	}
	start := st.Started
	if len(st.Attempts) > 0 {
		start = st.Attempts[0].Start
	}
	d := end.Sub(start)
	rec := RunRecord{
		MessageID:   st.MessageID,
		Routine:     st.Routine,
		Trigger:     st.Trigger,
		Migration:   st.Migration,
		Attempts:    len(st.Attempts),
		MaxAttempts: st.MaxAttempts,
		ExitCode:    st.ExitCode,
		Outcome:     st.Outcome,
		Start:       fmtTime(start, loc),
		End:         fmtTime(end, loc),
		Duration:    d.String(),
		DurationMS:  d.Milliseconds(),
		TimeZone:    loc.String(),
		Lane:        st.Lane,
	}
	for _, a := range st.Attempts {
		rec.AttemptDetails = append(rec.AttemptDetails, AttemptRecord{
			Attempt: a.N, ExitCode: a.ExitCode, Error: a.Error,
			Start: fmtTime(a.Start, loc), End: fmtTime(a.End, loc),
			WorkerID: a.WorkerID, LogName: a.LogName, Usage: a.Usage,
		})
	}
	rec.Usage, rec.MaxCostUSD = st.Usage, st.MaxCostUSD
	rec.ChainUsage = r.chainUsage(st.Usage)
	rec.Artifacts, _ = r.Artifacts()
	if !slices.Contains(rec.Artifacts, layout.RunFile) {
		rec.Artifacts = append(rec.Artifacts, layout.RunFile)
		slices.Sort(rec.Artifacts)
	}
	return rec
}

// ReadRunRecord reads runs/<id>/run.json.
func (s *Store) ReadRunRecord(id string) (RunRecord, error) {
	var rec RunRecord
	dir, err := s.RunDir(id)
	if err != nil {
		return rec, err
	}
	data, err := os.ReadFile(filepath.Join(dir, layout.RunFile))
	if err != nil {
		return rec, fmt.Errorf("read run.json of %s: %w", id, err)
	}
	if err := json.Unmarshal(data, &rec); err != nil {
		return rec, fmt.Errorf("read run.json of %s: %w", id, err)
	}
	return rec, nil
}

// chainUsage sums own with the recorded usage of the chain's earlier
// messages (nil when nothing was recorded).
//
// The earlier messages' sum is read once per run, and from as few files as
// possible: a finished earlier run.json carries its own chain_usage (the
// sum through that message), so the walk back from seq-1 stops at the
// first finished record; a message without one (never started, or still
// open) adds its own usage and the walk goes on. A long chain therefore
// costs one read per message, not one per earlier message.
func (r *Run) chainUsage(own *usage.Totals) *usage.Totals {
	r.beforeOnce.Do(func() { r.before = r.s.chainUsageBefore(r.id) })
	total := r.before
	if own != nil {
		total.Add(*own)
	}
	if total.IsZero() {
		return nil
	}
	return &total
}

// chainUsageBefore is the usage recorded by the messages of id's chain
// before it (seq 0 .. seq-1).
func (s *Store) chainUsageBefore(id string) usage.Totals {
	var total usage.Totals
	chain, seq, ok := message.SplitID(id)
	for k := seq - 1; ok && k >= 0; k-- {
		rec, err := s.ReadRunRecord(chain + "-" + strconv.Itoa(k))
		if err != nil {
			continue
		}
		if rec.Outcome != "" && (rec.ChainUsage != nil || rec.Usage == nil) {
			if rec.ChainUsage != nil {
				total.Add(*rec.ChainUsage)
			}
			break
		}
		if rec.Usage != nil {
			total.Add(*rec.Usage)
		}
	}
	return total
}

// SetMerge records how the message's parallel chain was merged in its
// run.json (durably: the merge journal is cleared only after it). A
// message without run.json yet is left alone.
func (s *Store) SetMerge(id string, m MergeRecord) error {
	rec, err := s.ReadRunRecord(id)
	if err != nil {
		return err
	}
	if m.Time == "" {
		m.Time = fmtTime(s.now(), s.loc)
	}
	rec.Merge = &m
	data, err := json.MarshalIndent(rec, "", "  ")
	if err != nil {
		return err
	}
	dir, err := s.RunDir(id)
	if err != nil {
		return err
	}
	if err := fsutil.WriteFileAtomic(filepath.Join(dir, layout.RunFile), append(data, '\n'), 0o644); err != nil {
		return fmt.Errorf("record the merge in run.json of %s: %w", id, err)
	}
	return nil
}
