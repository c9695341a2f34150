package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/decreehq/decree/controller/events"
	"github.com/decreehq/decree/controller/store"
	"github.com/decreehq/decree/internal/faultpoint"
	"github.com/decreehq/decree/pkg/checkpoint"
	"github.com/decreehq/decree/pkg/config"
	"github.com/decreehq/decree/pkg/fsutil"
	"github.com/decreehq/decree/pkg/merge"
	"github.com/decreehq/decree/pkg/message"
)

// The merge queue.
//
// A lane whose chain has no message left is merged into the project tree,
// one lane at a time in the order chains finished: a three-way merge
// (pkg/merge) of the lane's tree ("theirs") into the project tree as it is
// now ("ours"), with the project tree when the chain started as the base.
//
// The outcome is decided first and written to the lane's merge journal
// (.decree/lanes/<chain>/merge.json, durable) before anything changes:
//
//   - apply: a clean merge; the journal holds the final entry of every path
//     the merge changes. Those paths are written from the object store
//     (Checkpointer.Restore of the project tree with those paths replaced),
//     so a merge cut short by a crash is simply applied again: after a
//     restart it is either wholly applied or not at all, and finished once.
//   - requeue: the first conflict of a chain. Nothing is applied; the
//     chain's first message runs again as a new chain (its frontmatter
//     says merge_retry_of), on the project tree as it is then. The chain's
//     change stays in its run directories (changes.diff).
//   - dead: a second conflict, or a failing beforeMerge gate. Nothing is
//     applied; the chain's first message is moved from done/ to dead/ with
//     a note naming the conflicting files.
//
// Then run.json of each of the chain's messages records the result
// (store.MergeRecord), the merge order advances, and the lane is removed.

type mergeQueue struct {
	mu    sync.Mutex
	lanes []*lane
	wake  chan struct{}
}

// mergeJournal is merge.json.
type mergeJournal struct {
	State string `json:"state"` // apply, requeue, dead
	Order int64  `json:"order,omitempty"`
	Onto  string `json:"onto,omitempty"`
	// Paths the merge changes, with their final entries (absent: deleted)
	// and permission bits.
	Paths   []string                    `json:"paths,omitempty"`
	Entries map[string]checkpoint.Entry `json:"entries,omitempty"`
	Perms   map[string]fs.FileMode      `json:"perms,omitempty"`
	// Conflicts are "path: what both sides did".
	Conflicts []string `json:"conflicts,omitempty"`
	// Reason says why a chain is given up (dead).
	Reason string `json:"reason,omitempty"`
	// RequeueChain is the chain id reserved for the run again.
	RequeueChain string `json:"requeue_chain,omitempty"`
}

const (
	mergeJournalFile = "merge.json"
	mergeOrderFile   = "merge-order"
	mergeApply       = "apply"
	mergeRequeue     = "requeue"
	mergeDead        = "dead"
)

func hasJournal(l *lane) bool {
	_, err := os.Stat(filepath.Join(l.dir, mergeJournalFile))
	return err == nil
}

// queueMerge puts a finished lane in the merge queue.
func (p *Pipeline) queueMerge(l *lane) {
	l.mu.Lock()
	l.merging = true
	l.mu.Unlock()
	q := &p.merges
	q.mu.Lock()
	if hasJournal(l) {
		// A merge decided before a restart goes first: it holds the next
		// place in the merge order.
		q.lanes = append([]*lane{l}, q.lanes...)
	} else {
		q.lanes = append(q.lanes, l)
	}
	q.signal()
	q.mu.Unlock()
}

func (q *mergeQueue) signal() {
	if q.wake == nil {
		q.wake = make(chan struct{}, 1)
	}
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// next waits for the queue's head; nil when ctx ended.
func (q *mergeQueue) next(ctx context.Context) *lane {
	for {
		q.mu.Lock()
		if q.wake == nil {
			q.wake = make(chan struct{}, 1)
		}
		if len(q.lanes) > 0 {
			l := q.lanes[0]
			q.mu.Unlock()
			return l
		}
		w := q.wake
		q.mu.Unlock()
		select {
		case <-ctx.Done():
			return nil
		case <-w:
		}
	}
}

func (q *mergeQueue) pop(l *lane) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for i, x := range q.lanes {
		if x == l {
			q.lanes = append(q.lanes[:i], q.lanes[i+1:]...)
			return
		}
	}
}

// position is l's place in the queue (1 = merging now), 0 if not queued.
func (q *mergeQueue) position(l *lane) int {
	q.mu.Lock()
	defer q.mu.Unlock()
	for i, x := range q.lanes {
		if x == l {
			return i + 1
		}
	}
	return 0
}

// mergeLoop merges queued lanes one at a time until ctx ends. A merge that
// fails (a full disk, a store error) is retried after the poll interval:
// nothing is lost, and nothing else merges before it.
func (p *Pipeline) mergeLoop(ctx context.Context) {
	for {
		l := p.merges.next(ctx)
		if l == nil {
			return
		}
		err := p.mergeLane(ctx, l)
		if err == nil {
			p.merges.pop(l)
			p.Wake()
			continue
		}
		if ctx.Err() != nil {
			return
		}
		p.warn(ctx, "", fmt.Sprintf("merging chain %s into the project tree failed, retrying: %v", l.chain, err))
		if sleepCtx(ctx, p.d.Poll) != nil {
			return
		}
	}
}

// mergeLane decides (or reads) the lane's merge and carries it out.
func (p *Pipeline) mergeLane(ctx context.Context, l *lane) error {
	cfg, err := p.d.Config()
	if err != nil {
		return err
	}
	j, err := readJournal(l)
	fresh := errors.Is(err, fs.ErrNotExist)
	if err != nil && !fresh {
		return err
	}
	if fresh {
		if j, err = p.gateMerge(ctx, cfg, l); err != nil {
			return err
		}
	}
	// The project tree is read and written under treeMu (the afterMerge
	// hook included): a lane opening meanwhile must not take a half-applied
	// merge as its base.
	p.treeMu.Lock()
	defer p.treeMu.Unlock()
	if fresh {
		if j == nil {
			if j, err = p.decideMerge(ctx, l); err != nil {
				return err
			}
		}
		if err := writeJournal(l, j); err != nil {
			return err
		}
		faultpoint.Hit("merge-journaled")
	}
	switch j.State {
	case mergeApply:
		if err := p.applyMerge(ctx, j); err != nil {
			return err
		}
	case mergeRequeue:
		if err := p.requeueChain(l, j); err != nil {
			return err
		}
	case mergeDead:
		if err := p.giveUpChain(l, j); err != nil {
			return err
		}
	default:
		return fmt.Errorf("merge journal of lane %s has an unknown state %q; remove .decree/lanes/%s/merge.json to decide again", l.chain, j.State, l.chain)
	}
	return p.finishMerge(ctx, cfg, l, j)
}

// gateMerge runs the beforeMerge gate: a journal giving the chain up when
// it fails, nil when it passes (or there is none).
func (p *Pipeline) gateMerge(ctx context.Context, cfg *config.Config, l *lane) (*mergeJournal, error) {
	if hookName(cfg, "beforeMerge") != "" {
		root := store.Entry{ID: l.chain + "-0", Chain: l.chain, Message: &message.Message{}}
		env := map[string]string{"DECREE_HOOK": "beforeMerge", "DECREE_TRIGGER": "merge", "DECREE_CHAIN": l.chain}
		if why := p.runHook(ctx, cfg, "beforeMerge", cfg.Hooks.BeforeMerge, &root, nil, env, 0); why != "" {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return &mergeJournal{State: mergeDead, Reason: "the beforeMerge gate failed: " + why}, nil
		}
	}
	return nil, nil
}

// decideMerge runs the three-way merge; the caller holds treeMu.
func (p *Pipeline) decideMerge(ctx context.Context, l *lane) (*mergeJournal, error) {
	ours, err := p.d.Checkpoints.Snapshot(ctx, p.d.Store.Root())
	if err != nil {
		return nil, fmt.Errorf("snapshot the project tree to merge chain %s: %w", l.chain, err)
	}
	res, err := merge.Trees(ctx, p.d.Checkpoints.Store(), l.base, ours, l.current())
	if err != nil {
		return nil, fmt.Errorf("merge chain %s: %w", l.chain, err)
	}
	if len(res.Conflicts) > 0 {
		j := &mergeJournal{State: mergeRequeue}
		for _, c := range res.Conflicts {
			j.Conflicts = append(j.Conflicts, c.Path+": "+c.Reason)
		}
		if l.info.Retry > 0 {
			j.State = mergeDead
			j.Reason = "its change conflicted with the project tree a second time"
		} else {
			j.RequeueChain = p.d.Store.ReserveChain()
		}
		return j, nil
	}
	data, err := checkpoint.MarshalManifest(ours)
	if err != nil {
		return nil, err
	}
	j := &mergeJournal{State: mergeApply, Onto: digest(data), Order: p.mergeOrder() + 1, Paths: res.Changed,
		Entries: map[string]checkpoint.Entry{}, Perms: map[string]fs.FileMode{}}
	for _, path := range res.Changed {
		if e, ok := res.Tree.Files[path]; ok {
			j.Entries[path] = e
			j.Perms[path] = res.Tree.PermOf(path)
		}
	}
	return j, nil
}

// applyMerge writes the journal's paths into the project tree. Paths not
// in the journal are left as they are now, edits made by hand included.
func (p *Pipeline) applyMerge(ctx context.Context, j *mergeJournal) error {
	if len(j.Paths) == 0 {
		return nil
	}
	cur, err := p.d.Checkpoints.Snapshot(ctx, p.d.Store.Root())
	if err != nil {
		return fmt.Errorf("snapshot the project tree to apply a merge: %w", err)
	}
	want := &checkpoint.Manifest{Files: make(map[string]checkpoint.Entry, len(cur.Files)), ExactPerms: true}
	perms := map[string]fs.FileMode{}
	for path, e := range cur.Files {
		want.Files[path] = e
		perms[path] = cur.PermOf(path)
	}
	for _, path := range j.Paths {
		if e, ok := j.Entries[path]; ok {
			want.Files[path] = e
			perms[path] = j.Perms[path]
		} else {
			delete(want.Files, path)
			delete(perms, path)
		}
	}
	for path, perm := range perms {
		if e := want.Files[path]; e.Mode != checkpoint.ModeSymlink && perm != 0 && perm != e.Mode.Perm() {
			if want.Perms == nil {
				want.Perms = map[string]fs.FileMode{}
			}
			want.Perms[path] = perm
		}
	}
	if faultpoint.Active("merge-half-applied") && len(j.Paths) > 1 {
		// The fault tests' crash in the middle of a merge: half of the
		// paths written, then SIGKILL.
		half := &checkpoint.Manifest{Files: map[string]checkpoint.Entry{}, Perms: map[string]fs.FileMode{}, ExactPerms: true}
		for path, e := range cur.Files {
			half.Files[path] = e
			half.Perms[path] = cur.PermOf(path)
		}
		for _, path := range j.Paths[:len(j.Paths)/2] {
			if e, ok := want.Files[path]; ok {
				half.Files[path] = e
				half.Perms[path] = want.PermOf(path)
			} else {
				delete(half.Files, path)
			}
		}
		if _, err := p.d.Checkpoints.Restore(ctx, p.d.Store.Root(), half); err == nil {
			faultpoint.Hit("merge-half-applied")
		}
	}
	if _, err := p.d.Checkpoints.Restore(ctx, p.d.Store.Root(), want); err != nil {
		return fmt.Errorf("apply a merge to the project tree: %w", err)
	}
	faultpoint.Hit("merge-applied")
	return nil
}

// requeueChain queues the chain's first message again as a new chain.
func (p *Pipeline) requeueChain(l *lane, j *mergeJournal) error {
	if _, _, ok := p.d.Store.FindChainRoot(j.RequeueChain); ok {
		return nil // created before a restart
	}
	m, err := p.rootMessage(l)
	if err != nil {
		return err
	}
	for _, k := range []string{"id", "chain", "seq", "routine"} {
		m.Delete(k)
	}
	m.Set("chain", j.RequeueChain)
	m.Set("seq", 0)
	m.Set(retryOfKey, l.chain)
	name := strings.TrimSuffix(l.info.Root, ".md") + "-retry"
	if message.CheckName(name) != nil {
		name = ""
	}
	if _, err := p.d.Store.CreateMessage(name, m); err != nil {
		return fmt.Errorf("requeue chain %s after a merge conflict: %w", l.chain, err)
	}
	return nil
}

// rootMessage reads the chain's first message from done/.
func (p *Pipeline) rootMessage(l *lane) (*message.Message, error) {
	path := filepath.Join(p.d.Store.Dir(), "inbox", "done", l.info.Root)
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read the first message of chain %s: %w", l.chain, err)
	}
	return message.Parse(data)
}

// giveUpChain dead-letters the chain's first message.
func (p *Pipeline) giveUpChain(l *lane, j *mergeJournal) error {
	detail := fmt.Sprintf("Chain %s ran to its end, but its change was not merged into the project tree: %s.", l.chain, j.Reason)
	if len(j.Conflicts) > 0 {
		detail += "\n\nConflicting files:\n  " + strings.Join(j.Conflicts, "\n  ")
	}
	detail += fmt.Sprintf("\n\nNothing of it was applied. Each message's change is in .decree/runs/%s-N/changes.diff; resolve by hand, or requeue this message to run the chain again on the tree as it is now.", l.chain)
	note := store.DeadNote{Reason: "MergeConflict", MessageID: l.chain + "-0", Detail: detail}
	if _, err := p.d.Store.DeadLetterDone(l.info.Root, note); err != nil {
		return err
	}
	return nil
}

// finishMerge records the result in the chain's runs and closes the lane.
func (p *Pipeline) finishMerge(ctx context.Context, cfg *config.Config, l *lane, j *mergeJournal) error {
	rec := store.MergeRecord{Result: j.State, Order: j.Order, Onto: j.Onto, Base: l.baseSum, Paths: j.Paths, Conflicts: j.Conflicts}
	switch j.State {
	case mergeApply:
		rec.Result = "merged"
		if len(j.Paths) == 0 {
			rec.Result = "empty"
		}
	case mergeRequeue:
		rec.Result, rec.RequeuedAs = "conflict", j.RequeueChain
	}
	runs, err := p.d.Store.Runs(l.chain, 0)
	if err != nil {
		return err
	}
	for _, r := range runs {
		if err := p.d.Store.SetMerge(r.ID(), rec); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	if j.State == mergeApply && len(j.Paths) > 0 {
		if err := p.logMerge(mergeEntry{Order: j.Order, Chain: l.chain, Paths: j.Paths}); err != nil {
			return err
		}
		if err := p.setMergeOrder(j.Order); err != nil {
			return err
		}
	}
	if j.State == mergeRequeue || j.State == mergeDead {
		if err := p.logConflict(ConflictRecord{Chain: l.chain, Conflicts: conflictLines(j), RequeuedAs: j.RequeueChain}); err != nil {
			return err
		}
	}
	if err := l.remove(); err != nil {
		return err
	}
	p.mu.Lock()
	delete(p.lanes, l.chain)
	p.mu.Unlock()
	p.d.Leases.Unreserve(l.chain)
	switch j.State {
	case mergeApply:
		p.emit(ctx, &events.Event{Kind: events.ChainMerged, Chain: l.chain, Lane: l.chain,
			Text: fmt.Sprintf("merge %d: %d path(s) of chain %s merged into the project tree", j.Order, len(j.Paths), l.chain)})
		if hookName(cfg, "afterMerge") != "" {
			env := map[string]string{"DECREE_HOOK": "afterMerge", "DECREE_TRIGGER": "merge", "DECREE_CHAIN": l.chain}
			if why := p.runHook(ctx, cfg, "afterMerge", cfg.Hooks.AfterMerge, nil, nil, env, 0); why != "" {
				p.warn(ctx, "", "afterMerge hook failed: "+why)
			}
		}
	case mergeRequeue:
		p.emit(ctx, &events.Event{Kind: events.MergeConflict, Chain: l.chain, Lane: l.chain,
			Text: fmt.Sprintf("chain %s conflicts with the project tree (%s); nothing applied, requeued as chain %s", l.chain, strings.Join(j.Conflicts, "; "), j.RequeueChain)})
	case mergeDead:
		p.emit(ctx, &events.Event{Kind: events.MergeConflict, Chain: l.chain, Lane: l.chain,
			Text: fmt.Sprintf("chain %s not merged (%s); its first message is dead-lettered", l.chain, j.Reason)})
		p.emit(ctx, &events.Event{Kind: events.MessageDead, MessageID: l.chain + "-0", Chain: l.chain, Lane: l.chain,
			Text: "MergeConflict: " + j.Reason})
	}
	p.chainMaybeFinished(ctx, l.chain)
	return nil
}

func readJournal(l *lane) (*mergeJournal, error) {
	data, err := os.ReadFile(filepath.Join(l.dir, mergeJournalFile))
	if err != nil {
		return nil, err
	}
	var j mergeJournal
	if err := json.Unmarshal(data, &j); err != nil {
		return nil, fmt.Errorf("read the merge journal of lane %s: %w", l.chain, err)
	}
	return &j, nil
}

func writeJournal(l *lane, j *mergeJournal) error {
	sort.Strings(j.Paths)
	data, err := json.MarshalIndent(j, "", "  ")
	if err != nil {
		return err
	}
	if err := fsutil.WriteFileAtomic(filepath.Join(l.dir, mergeJournalFile), append(data, '\n'), 0o644); err != nil {
		return fmt.Errorf("write the merge journal of lane %s: %w", l.chain, err)
	}
	return nil
}

// mergeOrder is the number of merges applied so far.
func (p *Pipeline) mergeOrder() int64 {
	data, err := os.ReadFile(filepath.Join(p.lanesRoot(), mergeOrderFile))
	if err != nil {
		return 0
	}
	n, _ := strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64)
	return n
}

func (p *Pipeline) setMergeOrder(n int64) error {
	if n <= p.mergeOrder() {
		return nil
	}
	if err := os.MkdirAll(p.lanesRoot(), 0o755); err != nil {
		return err
	}
	return fsutil.WriteFileAtomic(filepath.Join(p.lanesRoot(), mergeOrderFile), []byte(strconv.FormatInt(n, 10)+"\n"), 0o644)
}
