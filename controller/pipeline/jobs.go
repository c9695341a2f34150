package pipeline

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"github.com/decreehq/decree/controller/events"
	"github.com/decreehq/decree/controller/store"
	"github.com/decreehq/decree/pkg/config"
	"github.com/decreehq/decree/pkg/layout"
	"github.com/decreehq/decree/pkg/message"
)

// ErrBusy is returned (wrapped) when a process job is already running.
var ErrBusy = errors.New("busy")

// Migration is a spec file of the migrations directory.
type Migration struct {
	File      string
	Processed bool
	// Queued is the id of the message of this migration waiting in the
	// inbox (requeued from dead/, interrupted, or waiting for a usage
	// limit): processing the migration resumes that message rather than
	// queuing a second one.
	Queued string
}

// job is one ProcessMigrations run: the messages already queued when it
// started (drained first: their chains are older), the migrations still to
// start, the root message in progress, and whether to stop at a failure.
type job struct {
	id        string
	drain     map[string]bool // chains queued in the inbox when the job started
	drainDead int             // messages of those chains dead-lettered since
	// drainBad are the inbox files that were unreadable when the job
	// started (no chain yet): they are dead-lettered as the job runs.
	drainBad map[string]bool
	pending  []string
	// adopted maps a pending migration to its message already queued in
	// the inbox, which the job runs in the migration's turn instead of a
	// new one; held are those messages' chains, which the loop leaves
	// alone until then.
	adopted   map[string]store.Entry
	held      map[string]bool
	current   string // message id of the running migration's root message
	chain     string
	migration string
	failed    []string
	stop      bool
	// starting is true while ProcessMigrations queues the first
	// migration; the loop leaves such a job alone.
	starting bool
}

// owns reports whether events of chain belong to the job. p.mu is held.
func (j *job) owns(chain string) bool {
	return chain != "" && (chain == j.chain || j.drain[chain])
}

// MigrationCounts counts the migrations processed and pending, without
// looking for their queued messages (status needs only the counts, and a
// fresh process would otherwise read every queued file).
func (p *Pipeline) MigrationCounts(cfg *config.Config) (processed, pending int, err error) {
	dir := filepath.Join(p.d.Store.Root(), filepath.FromSlash(cfg.MigrationsDir))
	ents, err := os.ReadDir(dir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return 0, 0, fmt.Errorf("list migrations in %s: %w", dir, err)
	}
	done, err := p.d.Store.Processed()
	if err != nil {
		return 0, 0, err
	}
	for _, e := range ents {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".spec.md") {
			continue
		}
		if done[e.Name()] {
			processed++
		} else {
			pending++
		}
	}
	return processed, pending, nil
}

// Migrations lists the migrations in file-name order with their state.
func (p *Pipeline) Migrations(cfg *config.Config) ([]Migration, error) {
	dir := filepath.Join(p.d.Store.Root(), filepath.FromSlash(cfg.MigrationsDir))
	ents, err := os.ReadDir(dir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("list migrations in %s: %w", dir, err)
	}
	done, err := p.d.Store.Processed()
	if err != nil {
		return nil, err
	}
	queued, err := p.queuedMigrations(cfg)
	if err != nil {
		return nil, err
	}
	var out []Migration
	for _, e := range ents {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".spec.md") {
			continue
		}
		m := Migration{File: e.Name(), Processed: done[e.Name()]}
		if q, ok := queued[m.File]; ok && !m.Processed {
			m.Queued = q.ID
		}
		out = append(out, m)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].File < out[j].File })
	return out, nil
}

// queuedMigrations maps migrations to their root message queued in the
// inbox (the oldest, should there be several).
func (p *Pipeline) queuedMigrations(cfg *config.Config) (map[string]store.Entry, error) {
	entries, err := p.d.Store.ListInbox()
	if err != nil {
		return nil, err
	}
	out := map[string]store.Entry{}
	for _, e := range entries {
		if e.Err != nil || e.Message == nil || e.Seq != 0 {
			continue
		}
		if mig := migrationOf(cfg, e); mig != "" {
			if _, seen := out[mig]; !seen {
				out[mig] = e
			}
		}
	}
	return out, nil
}

// ProcessMigrations starts a job that first drains the messages already
// queued in the inbox (a requeued dead letter, a file dropped in by hand),
// then runs every unprocessed migration in order (unless dryRun). It
// returns the migrations, the job id ("" when nothing is queued or pending
// or for a dry run) and the event sequence to watch from.
func (p *Pipeline) ProcessMigrations(ctx context.Context, dryRun bool) ([]Migration, string, uint64, error) {
	cfg, err := p.d.Config()
	if err != nil {
		return nil, "", 0, err
	}
	migs, err := p.Migrations(cfg)
	if err != nil {
		return nil, "", 0, err
	}
	seq := p.d.Events.Last() + 1
	if dryRun {
		return migs, "", seq, nil
	}
	if p.isStopping() {
		return nil, "", 0, fmt.Errorf("%w: start processing again once it stopped (decreectl does so by itself)", ErrStopping)
	}
	p.processAll()
	p.retryNotReady()
	var pending []string
	for _, m := range migs {
		if !m.Processed {
			pending = append(pending, m.File)
		}
	}
	adopted, err := p.queuedMigrations(cfg)
	if err != nil {
		return nil, "", 0, err
	}
	held := map[string]bool{}
	for _, mig := range pending {
		if e, ok := adopted[mig]; ok {
			held[e.Chain] = true
		}
	}
	queued, err := p.d.Store.ListInbox()
	if err != nil {
		return nil, "", 0, err
	}
	drain, bad := map[string]bool{}, map[string]bool{}
	for _, e := range queued {
		switch {
		case held[e.Chain]:
			// a pending migration's message: it runs in its turn
		case e.Chain != "":
			drain[e.Chain] = true
		case e.Err != nil:
			bad[e.File] = true
		}
	}
	if len(pending) == 0 && len(drain) == 0 && len(bad) == 0 {
		return migs, "", seq, nil
	}
	p.mu.Lock()
	for _, j := range p.jobs {
		p.mu.Unlock()
		return nil, "", 0, fmt.Errorf("%w: process job %s is still running; wait for it to finish", ErrBusy, j.id)
	}
	j := &job{id: newJobID(), drain: drain, drainBad: bad, pending: pending, adopted: adopted, held: held, stop: cfg.OnMigrationFailure != "continue", starting: len(pending) > 0}
	p.jobs[j.id] = j
	p.mu.Unlock()
	if len(pending) == 0 {
		p.Resume()
		p.Wake()
		return migs, j.id, seq, nil
	}
	if err := p.startNextMigration(ctx, cfg, j); err != nil {
		p.mu.Lock()
		delete(p.jobs, j.id)
		p.mu.Unlock()
		return nil, "", 0, err
	}
	p.mu.Lock()
	j.starting = false
	p.mu.Unlock()
	p.Resume()
	p.Wake()
	return migs, j.id, seq, nil
}

func newJobID() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return "job-" + hex.EncodeToString(b)
}

// startNextMigration queues the job's next migration as a spec message,
// or lets its message already queued run. Called with p.mu not held.
func (p *Pipeline) startNextMigration(ctx context.Context, cfg *config.Config, j *job) error {
	file := j.pending[0]
	if e, ok := j.adopted[file]; ok && p.inInbox(e.File) {
		p.mu.Lock()
		j.pending = j.pending[1:]
		j.current, j.chain, j.migration = e.ID, e.Chain, file
		delete(j.held, e.Chain)
		p.mu.Unlock()
		p.emit(ctx, &events.Event{Kind: events.MessageQueued, MessageID: e.ID, Chain: e.Chain, JobID: j.id, Text: "migration " + file + " (its queued message resumes)"})
		return nil
	}
	m := &message.Message{HasFrontmatter: true}
	m.Set("input_file", path.Join(cfg.MigrationsDir, file))
	m.Set("type", message.TypeSpec)
	e, err := p.d.Store.CreateMessage(strings.TrimSuffix(file, ".spec.md"), m)
	if err != nil {
		return fmt.Errorf("queue migration %s: %w", file, err)
	}
	p.mu.Lock()
	j.pending = j.pending[1:]
	j.current, j.chain, j.migration = e.ID, e.Chain, file
	p.mu.Unlock()
	p.emit(ctx, &events.Event{Kind: events.MessageQueued, MessageID: e.ID, Chain: e.Chain, JobID: j.id, Text: "migration " + file})
	return nil
}

// advanceJobs moves every job whose current chain has finished on to its
// next migration, or ends it.
func (p *Pipeline) advanceJobs(ctx context.Context) {
	p.mu.Lock()
	var ready []*job
	for _, j := range p.jobs {
		if !j.starting {
			ready = append(ready, j)
		}
	}
	p.mu.Unlock()
	for _, j := range ready {
		if j.current != "" {
			if !p.chainDone(j.chain) {
				if p.waitingChain(j.chain) {
					// A waiting migration blocks the later ones: the job
					// ends here, and the next process goes on.
					p.endJob(ctx, j, ExitWaiting, fmt.Sprintf("migration %s waits for a reply (`decreectl waits`); %d later migration(s) not started", j.migration, len(j.pending)))
				}
				continue
			}
			if nr, held := p.notReadyReason(j.current); held {
				p.mu.Lock()
				j.current = ""
				p.mu.Unlock()
				p.endJob(ctx, j, 1, fmt.Sprintf("migration %s: %v", j.migration, nr))
				continue
			}
			if p.rootOutcome(j.current) != store.OutcomeSucceeded {
				j.failed = append(j.failed, j.migration)
			}
			p.mu.Lock()
			j.current = ""
			p.mu.Unlock()
		}
		cfg, err := p.d.Config()
		if err != nil {
			p.endJob(ctx, j, 1, fmt.Sprintf("cannot load the configuration: %v", err))
			continue
		}
		switch {
		case len(j.failed) > 0 && j.stop:
			p.endJob(ctx, j, 1, fmt.Sprintf("migration %s was dead-lettered; stopping (on_migration_failure: stop); %d migration(s) not started", j.migration, len(j.pending)))
		case len(j.pending) > 0:
			if err := p.startNextMigration(ctx, cfg, j); err != nil {
				p.endJob(ctx, j, 1, err.Error())
			}
		case !p.chainsDone(j.drain) && p.onlyWaiting(j.drain):
			p.endJob(ctx, j, ExitWaiting, "queued messages wait for a reply (`decreectl waits`)")
		case !p.chainsDone(j.drain) || p.badPending(j):
			// queued messages of older chains are still running
		case len(j.failed) > 0:
			p.endJob(ctx, j, 1, fmt.Sprintf("%d migration(s) dead-lettered: %s", len(j.failed), strings.Join(j.failed, ", ")))
		case p.heldBack() != "":
			p.endJob(ctx, j, 1, p.heldBack())
		case p.drainDead(j) > 0:
			p.endJob(ctx, j, 1, fmt.Sprintf("%d queued message(s) dead-lettered; see .decree/inbox/dead/", p.drainDead(j)))
		case j.migration == "":
			p.endJob(ctx, j, 0, "every queued message succeeded")
		default:
			p.endJob(ctx, j, 0, "every migration succeeded")
		}
	}
}

// rejectedInJob returns the job a message rejected by the scheduler belongs
// to when it has no chain (an unreadable file queued before the job
// started), counting it as one of the job's dead letters.
func (p *Pipeline) rejectedInJob(chain, file string) string {
	if chain != "" {
		return ""
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, j := range p.jobs {
		if j.drainBad[file] {
			delete(j.drainBad, file)
			j.drainDead++
			return j.id
		}
	}
	return ""
}

// inInbox reports whether inbox/file exists.
func (p *Pipeline) inInbox(file string) bool {
	_, err := os.Lstat(filepath.Join(p.d.Store.Root(), layout.Dir, layout.Inbox, file))
	return err == nil
}

// heldChains reports whether chain belongs to a pending migration whose
// turn has not come (the loop leaves it alone).
func (p *Pipeline) heldChain(chain string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, j := range p.jobs {
		if j.held[chain] {
			return true
		}
	}
	return false
}

// badPending reports whether an unreadable file the job counts on is still
// waiting in the inbox to be dead-lettered.
func (p *Pipeline) badPending(j *job) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for f := range j.drainBad {
		if _, err := os.Lstat(filepath.Join(p.d.Store.Root(), layout.Dir, layout.Inbox, f)); err == nil {
			return true
		}
		delete(j.drainBad, f)
	}
	return false
}

func (p *Pipeline) drainDead(j *job) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return j.drainDead
}

func (p *Pipeline) endJob(ctx context.Context, j *job, code int32, text string) {
	p.mu.Lock()
	j.held = nil
	delete(p.jobs, j.id)
	p.mu.Unlock()
	p.hold(&events.Event{Kind: events.ProcessFinished, JobID: j.id, ExitCode: int(code), Text: text})
}

// chainDone reports whether no message of chain is left in the inbox.
func (p *Pipeline) chainDone(chain string) bool {
	return p.chainsDone(map[string]bool{chain: true})
}

// chainsDone reports whether no message of any of chains is left in the
// inbox, and none of them waits to be merged.
func (p *Pipeline) chainsDone(chains map[string]bool) bool {
	if len(chains) == 0 {
		return true
	}
	for c := range chains {
		if p.laneOf(c) != nil {
			return false // a parallel chain is done once merged (merge.go)
		}
	}
	queued, err := p.d.Store.ChainsQueued(chains)
	return err == nil && !queued
}

// rootOutcome is how a message ended: its run's outcome, or dead-lettered
// when it never got a run (rejected before running).
func (p *Pipeline) rootOutcome(id string) string {
	run, err := p.d.Store.OpenRun(id)
	if err != nil {
		return store.OutcomeDeadLettered
	}
	if o := run.State().Outcome; o != "" {
		return o
	}
	return store.OutcomeDeadLettered
}
