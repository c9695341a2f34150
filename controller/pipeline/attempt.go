package pipeline

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/decreehq/decree/controller/events"
	"github.com/decreehq/decree/controller/lease"
	"github.com/decreehq/decree/controller/msgstate"
	"github.com/decreehq/decree/controller/store"
	"github.com/decreehq/decree/internal/faultpoint"
	"github.com/decreehq/decree/pkg/layout"
	"github.com/decreehq/decree/pkg/message"
	"github.com/decreehq/decree/pkg/routine"
	decreev1 "github.com/decreehq/decree/proto/decree/v1"
)

// attempt runs attempt n of a message: beforeEach, the routine, afterEach,
// the diff, the stages' look at the end, and follow-up collection (on
// success) or discarding (on failure).
//
// The attempt's start, with the inbox as it was before it, is recorded in
// the message's state machine before the routine runs; its end (success,
// failure, or a usage limit) in one write before follow-ups are collected
// or discarded. An error with ctx ended means the attempt was stopped
// (shutdown or cancel): its end is not recorded, the caller decides.
func (p *Pipeline) attempt(ctx context.Context, m *msg, n int) error {
	cfg, e, rt, run := m.cfg, m.e, m.rt, m.run
	st := p.d.Store
	var before store.InboxSnapshot
	if m.lane == nil {
		var err error
		if before, err = p.snapshotInbox(run); err != nil {
			return err
		}
		defer st.ReleaseSnapshot()
	}
	m.laneFiles = nil
	if v := run.Machine(); v.State == msgstate.Interrupted && v.Attempt == n {
		// Its logs may still be being ended (cut, synced) in the
		// background by this controller: they are renamed below.
		p.d.Logs.WaitAttempt(e.ID, n)
		if err := setAsideInterrupted(run, n, v.Reruns+1); err != nil {
			return err
		}
	}
	a, err := run.BeginAttemptStep(func(v msgstate.Msg) (msgstate.Msg, error) { return msgstate.Start(v, n) })
	if err != nil {
		return err
	}
	max := run.Machine().Max
	p.mu.Lock()
	if r := p.running[e.ID]; r != nil {
		r.attempt = a.N
	}
	p.mu.Unlock()
	p.d.Logs.Begin(e.ID, a.N)
	defer p.d.Logs.End(e.ID, a.N)
	// The checkpoint, the inbox snapshot and the attempt's start are
	// durable before any routine or hook can change the tree.
	if err := run.Commit(); err != nil {
		return err
	}
	p.emit(ctx, &events.Event{Kind: events.AttemptStarted, MessageID: e.ID, Chain: e.Chain, Attempt: a.N, Routine: rt.Name})

	end := attemptEnd{exitCode: -1}
	workerID := ""
	if hookErr := p.runMessageHook(ctx, cfg, e, run, "beforeEach", a.N, 0, false); hookErr != "" {
		end.errText = "beforeEach hook failed: " + hookErr
		end.res.Blocked = true
	} else {
		status, wid, derr := p.dispatchRoutine(ctx, m, a.N, max)
		workerID = wid
		if workerID != "" {
			_ = run.SetAttemptWorker(a.N, workerID)
		}
		if derr != nil {
			if ctx.Err() != nil {
				return derr
			}
			end.errText = derr.Error()
		} else {
			end.exitCode = int(status.GetExitCode())
			end.errText = status.GetError()
		}
		if hookErr := p.runMessageHook(ctx, cfg, e, run, "afterEach", a.N, end.exitCode, a.N == max); hookErr != "" {
			p.warn(ctx, e.ID, "afterEach hook failed: "+hookErr)
		}
	}
	if ctx.Err() != nil {
		// Stopped by the shutdown or a cancel, not by the routine.
		return ctx.Err()
	}
	if m.lane != nil {
		// A lane's worker sent its follow-ups back with its result: they
		// enter the inbox now, between this attempt's snapshot and its
		// collection, while no other lane collects (lane_tree.go).
		p.collectMu.Lock()
		defer p.collectMu.Unlock()
		var err error
		if before, err = p.snapshotInbox(run); err != nil {
			return err
		}
		defer st.ReleaseSnapshot()
		if err := p.markCollecting(e.ID); err != nil {
			return err
		}
		defer p.unmarkCollecting()
		if err := p.deliverLaneFiles(ctx, &e, run, workerID, m.laneFiles); err != nil {
			p.warn(ctx, e.ID, err.Error())
		}
		m.laneFiles = nil
		faultpoint.Hit("lane-delivered")
	}
	end.res.OK = end.exitCode == 0 && end.errText == ""
	// An attempt that printed nothing still has its (empty) log.
	if lp, err := st.LogPath(e.ID, a.N, "routine"); err == nil {
		if f, err := os.OpenFile(lp, os.O_CREATE|os.O_WRONLY, 0o644); err == nil {
			f.Close()
		}
	}
	tree, err := p.writeDiff(ctx, run, m.manifest, a.N)
	if err != nil {
		p.warn(ctx, e.ID, err.Error())
	} else if !end.res.OK {
		// The next attempt starts from this tree.
		if err := saveTreeAfter(run, a.N, tree); err != nil {
			return err
		}
	}
	p.afterAttempt(ctx, m, a.N, &end)
	switch w := end.res.Wait; {
	case !end.res.OK, w != nil && w.Kind == msgstate.AskWait:
		p.discardFollowUps(run, before, a.N)
	case w != nil:
		p.holdFollowUps(run, before) // until the review approves them
	}
	if _, err := run.FinishAttemptStep(a.N, end.exitCode, end.errText, func(v msgstate.Msg) (msgstate.Msg, error) { return msgstate.End(v, a.N, end.res) }); err != nil {
		return err
	}
	if end.res.OK && end.res.Wait == nil {
		if err := p.collect(ctx, m, before); err != nil {
			return err
		}
	}
	p.emit(ctx, &events.Event{Kind: events.AttemptFinished, MessageID: e.ID, Chain: e.Chain,
		Attempt: a.N, ExitCode: end.exitCode, Text: end.errText, WorkerID: workerID})
	return nil
}

// params builds the standard and declared custom parameters of a message.
func (p *Pipeline) params(e store.Entry, rt routine.Routine) (map[string]string, error) {
	dir := path.Join(layout.Dir, layout.Runs, e.ID)
	params := map[string]string{
		"spec_file":    e.Message.InputFile(),
		"message_file": path.Join(dir, layout.MessageFile),
		"message_id":   e.ID,
		"message_dir":  dir,
		"chain":        e.Chain,
		"seq":          strconv.Itoa(e.Seq),
	}
	custom, err := rt.CustomParams()
	if err != nil {
		return nil, err
	}
	for _, c := range custom {
		if v, ok := e.Message.Get(c.Name); ok {
			params[c.Name] = message.ParamValue(v)
		}
	}
	return params, nil
}

// dispatchRoutine hands the routine to a worker and waits for the result.
func (p *Pipeline) dispatchRoutine(ctx context.Context, m *msg, n, max int) (*decreev1.ExitStatus, string, error) {
	cfg, rt, run := m.cfg, m.rt, m.run
	e := m.e
	params, err := p.params(e, rt)
	if err != nil {
		return nil, "", fmt.Errorf("read the parameters of routine %s: %w", rt.Name, err)
	}
	ref, err := p.routineRef(rt)
	if err != nil {
		return nil, "", err
	}
	settings := cfg.RoutineSettingsFor(rt.Name, rt.Shared)
	a := &lease.Work{
		Kind: lease.WorkRoutine, Attempt: n, MaxAttempts: max,
		MessageID: e.ID, Routine: ref, Params: params,
		MessageDir: path.Join(layout.Dir, layout.Runs, e.ID), NotebookEngine: cfg.NotebookEngine, Tree: &cfg.Tree,
		Env: map[string]string{"DECREE_ATTEMPT": strconv.Itoa(n), "DECREE_MAX_ATTEMPTS": strconv.Itoa(max), "DECREE_MAX_RETRIES": strconv.Itoa(max)},
	}
	resumeEnv(run.Machine(), n, a.Env)
	p.costs().env(m, n, max, a.Env)
	waitFiles := waitEnv(run, e.ID, n, a.Env)
	if settings.TimeoutS > 0 {
		a.Timeout = time.Duration(settings.TimeoutS) * time.Second
	}
	rs, err := p.prepareReplica(ctx, a)
	if err != nil {
		return nil, "", err
	}
	defer rs.done()
	if !rs.inPlace {
		// An in-place worker shares the tree and finds message.md in the
		// run directory: a large message is not copied into the assignment.
		a.RunFiles = runFiles(run, waitFiles...)
	}
	need := routineNeeds(cfg, rt)
	stopWatch := p.watchWorkers(ctx, e.ID, fmt.Sprintf("attempt %d of routine %s", n, rt.Name), need)
	rs.needs(&need)
	dctx, overBudget := p.costs().watch(ctx, m, n, rs.inPlace)
	res, err := p.dispatch(dctx, a, need)
	if why := overBudget(); why != "" && err != nil && ctx.Err() == nil {
		err = errors.New(why)
	}
	stopWatch()
	apply := func() error { return p.applyReplica(ctx, rs, &e, run, res) }
	if rs.lane != nil {
		// The follow-ups wait for the attempt's collection (attempt).
		apply = func() error { return p.applyLane(ctx, rs, &e, run, res, &m.laneFiles) }
	}
	if aerr := apply(); aerr != nil && err == nil {
		return nil, res.WorkerID, aerr
	}
	if err != nil {
		return res.Status, res.WorkerID, fmt.Errorf("run routine %s: %w", rt.Name, err)
	}
	if res.Lost {
		return nil, res.WorkerID, fmt.Errorf("worker lost: %s stopped renewing its lease", orUnknown(res.WorkerID))
	}
	return res.Status, res.WorkerID, nil
}

func orUnknown(s string) string {
	if s == "" {
		return "the worker"
	}
	return "worker " + s
}

// routineRef describes a routine for an assignment.
func (p *Pipeline) routineRef(rt routine.Routine) (*lease.RoutineRef, error) {
	content, err := os.ReadFile(rt.Path)
	if err != nil {
		return nil, fmt.Errorf("read routine %s: %w", rt.Name, err)
	}
	rel := rt.Path
	if r, err := filepath.Rel(p.d.Store.Root(), rt.Path); err == nil && !strings.HasPrefix(r, "..") {
		rel = filepath.ToSlash(r)
	}
	return &lease.RoutineRef{Name: rt.Name, Driver: rt.Format.Driver(), Path: rel, Content: content, Format: rt.Format}, nil
}

// runFileInlineLimit is the largest run file that travels inside an
// assignment; a larger one (a large message.md) is listed with Fetch set
// and the worker streams it with GetRunFile, so that neither side holds it
// whole.
const runFileInlineLimit = 1 << 20

// runFiles are the run-directory files a worker places before running.
func runFiles(run *store.Run, extra ...string) []lease.File {
	var out []lease.File
	for _, name := range append([]string{layout.MessageFile, layout.FailureContextFile}, extra...) {
		p, err := run.Path(name)
		if err != nil {
			continue
		}
		fi, err := os.Stat(p)
		if err != nil {
			continue
		}
		if fi.Size() > runFileInlineLimit {
			out = append(out, lease.File{Name: name, Size: fi.Size(), Fetch: true})
			continue
		}
		if b, err := os.ReadFile(p); err == nil {
			out = append(out, lease.File{Name: name, Content: b, Size: int64(len(b))})
		}
	}
	return out
}

// discardFollowUps moves the follow-ups a failed attempt wrote (new inbox
// files and everything in the outbox) into the run directory, so they
// neither run nor get lost.
func (p *Pipeline) discardFollowUps(run *store.Run, before store.InboxSnapshot, n int) {
	dst := filepath.Join(run.Dir(), layout.DiscardedDir(n))
	p.moveFollowUps(run, before, dst, dst)
	moveHeldOutbox(run, dst)
}

// moveFollowUps moves the follow-ups an attempt wrote into the inbox (new
// follow-up names since before) to inboxDst and the outbox's files to
// outboxDst.
func (p *Pipeline) moveFollowUps(run *store.Run, before store.InboxSnapshot, inboxDst, outboxDst string) {
	// In a lane only the chain's own follow-up names are the attempt's:
	// other lanes queue theirs meanwhile (lane_tree.go).
	chain := ""
	if p.runLane(run) != nil {
		chain, _, _ = message.SplitID(run.ID())
	}
	dot := filepath.Join(p.d.Store.Root(), layout.Dir)
	move := func(dir, dst string, skip func(string) bool) {
		ents, err := os.ReadDir(dir)
		if err != nil {
			return
		}
		for _, de := range ents {
			name := de.Name()
			if de.IsDir() || !layout.IsMessageFile(name) || skip(name) {
				continue
			}
			if err := os.MkdirAll(dst, 0o755); err != nil {
				p.log.Error("discard follow-up", "err", err)
				return
			}
			if err := os.Rename(filepath.Join(dir, name), filepath.Join(dst, name)); err != nil {
				p.log.Error("discard follow-up", "file", name, "err", err)
			}
		}
	}
	// Only follow-up names: a message dropped into the inbox while the
	// attempt ran belongs to nobody's attempt and stays queued.
	move(filepath.Join(dot, layout.Inbox), inboxDst, func(name string) bool {
		if chain != "" {
			if c, _, ok := message.ChainFromFileName(name); !ok || c != chain {
				return true
			}
		}
		return before.Has(name) || !store.IsFollowUpName(name)
	})
	move(filepath.Join(dot, layout.Outbox), outboxDst, func(string) bool { return false })
}

// writeFailureContext summarises the earlier attempts for the last one.
func (p *Pipeline) writeFailureContext(run *store.Run) error {
	s := run.State()
	var b strings.Builder
	fmt.Fprintf(&b, "# Earlier attempts of %s\n\n", s.MessageID)
	fmt.Fprintf(&b, "This is the last attempt (%d of %d). The working tree was reverted to the checkpoint taken before the first attempt, so none of the earlier changes are present. What happened before:\n\n", len(s.Attempts)+1, s.MaxAttempts)
	b.WriteString(attemptSummary(s))
	for _, a := range s.Attempts {
		logPath, err := run.Path(a.LogName)
		if err != nil {
			continue
		}
		if tail := tailLines(logPath, 30); tail != "" {
			fmt.Fprintf(&b, "\n## Attempt %d: end of %s\n\n```\n%s\n```\n", a.N, a.LogName, tail)
		}
		if diffPath, err := run.Path(layout.AttemptDiffName(a.N)); err == nil {
			if files := diffFiles(diffPath); len(files) > 0 {
				fmt.Fprintf(&b, "\nAttempt %d changed: %s (see %s)\n", a.N, strings.Join(files, ", "), layout.AttemptDiffName(a.N))
			}
		}
	}
	return run.WriteFile(layout.FailureContextFile, []byte(b.String()))
}

// attemptSummary lists attempts with their outcome.
func attemptSummary(s store.RunState) string {
	var b strings.Builder
	for _, a := range s.Attempts {
		fmt.Fprintf(&b, "- attempt %d: exit code %d", a.N, a.ExitCode)
		if a.Error != "" {
			fmt.Fprintf(&b, ", %s", a.Error)
		}
		if a.WorkerID != "" {
			fmt.Fprintf(&b, " (worker %s)", a.WorkerID)
		}
		fmt.Fprintf(&b, "; log %s\n", a.LogName)
	}
	return b.String()
}

// tailLines returns the last n lines of a file (at most 16 KiB read).
func tailLines(p string, n int) string {
	f, err := os.Open(p)
	if err != nil {
		return ""
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return ""
	}
	const max = 16 << 10
	off := fi.Size() - max
	if off < 0 {
		off = 0
	}
	buf := make([]byte, fi.Size()-off)
	if _, err := f.ReadAt(buf, off); err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(buf), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// watchWorkers warns, while an attempt is outstanding, whenever no
// connected worker could take it and each time the reason changes (no
// worker at all, a missing driver, missing labels), so a wait is never
// silent. It checks at once and then every workerCheckInterval.
func (p *Pipeline) watchWorkers(ctx context.Context, id, what string, need lease.Requirements) (stop func()) {
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(workerCheckInterval)
		defer t.Stop()
		last := ""
		for {
			if why, _ := p.d.Leases.Unmatched(need); why != last {
				if why != "" {
					p.warn(ctx, id, fmt.Sprintf("%s waits for a worker: %s", what, why))
				}
				last = why
			}
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return func() { close(done); <-finished }
}

// workerCheckInterval is how often watchWorkers looks again.
const workerCheckInterval = time.Second

// snapshotInbox takes the inbox snapshot an attempt's follow-ups are told
// apart by and records it in the run; the caller releases it.
func (p *Pipeline) snapshotInbox(run *store.Run) (store.InboxSnapshot, error) {
	before, err := p.d.Store.SnapshotInbox()
	if err != nil {
		return before, err
	}
	if err := run.RecordInboxSnapshot(before); err != nil {
		p.d.Store.ReleaseSnapshot()
		return before, err
	}
	return before, nil
}
