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

	"github.com/decreehq/decree/controller/store"
	"github.com/decreehq/decree/pkg/config"
	"github.com/decreehq/decree/pkg/message"
	decreev1 "github.com/decreehq/decree/proto/decree/v1"
)

// ErrBusy is returned (wrapped) when a process job is already running.
var ErrBusy = errors.New("busy")

// Migration is a spec file of the migrations directory.
type Migration struct {
	File      string
	Processed bool
}

// job is one ProcessMigrations run: the migrations still to start, the
// root message in progress, and whether to stop at a failure.
type job struct {
	id        string
	pending   []string
	current   string // message id of the running migration's root message
	chain     string
	migration string
	failed    []string
	stop      bool
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
	var out []Migration
	for _, e := range ents {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".spec.md") {
			continue
		}
		out = append(out, Migration{File: e.Name(), Processed: done[e.Name()]})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].File < out[j].File })
	return out, nil
}

// ProcessMigrations starts a job that runs every unprocessed migration in
// order (unless dryRun). It returns the migrations, the job id ("" when
// nothing is pending or for a dry run) and the event sequence to watch
// from.
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
	var pending []string
	for _, m := range migs {
		if !m.Processed {
			pending = append(pending, m.File)
		}
	}
	if len(pending) == 0 {
		return migs, "", seq, nil
	}
	p.mu.Lock()
	for _, j := range p.jobs {
		p.mu.Unlock()
		return nil, "", 0, fmt.Errorf("%w: process job %s is still running; wait for it to finish", ErrBusy, j.id)
	}
	j := &job{id: newJobID(), pending: pending, stop: cfg.OnMigrationFailure != "continue"}
	p.jobs[j.id] = j
	p.mu.Unlock()
	if err := p.startNextMigration(ctx, cfg, j); err != nil {
		p.mu.Lock()
		delete(p.jobs, j.id)
		p.mu.Unlock()
		return nil, "", 0, err
	}
	p.Wake()
	return migs, j.id, seq, nil
}

func newJobID() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return "job-" + hex.EncodeToString(b)
}

// startNextMigration queues the job's next migration as a spec message.
// Called with p.mu not held.
func (p *Pipeline) startNextMigration(ctx context.Context, cfg *config.Config, j *job) error {
	file := j.pending[0]
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
	p.emit(ctx, &decreev1.Event{Kind: decreev1.EventKind_EVENT_KIND_MESSAGE_QUEUED, MessageId: e.ID, Chain: e.Chain, JobId: j.id, Text: "migration " + file})
	return nil
}

// advanceJobs moves every job whose current chain has finished on to its
// next migration, or ends it.
func (p *Pipeline) advanceJobs(ctx context.Context) {
	p.mu.Lock()
	var ready []*job
	for _, j := range p.jobs {
		ready = append(ready, j)
	}
	p.mu.Unlock()
	for _, j := range ready {
		if !p.chainDone(j.chain) {
			continue
		}
		outcome := p.rootOutcome(j.current)
		if outcome != store.OutcomeSucceeded {
			j.failed = append(j.failed, j.migration)
		}
		cfg, err := p.d.Config()
		if err != nil {
			p.endJob(ctx, j, 1, fmt.Sprintf("cannot load the configuration: %v", err))
			continue
		}
		switch {
		case len(j.failed) > 0 && j.stop:
			p.endJob(ctx, j, 1, fmt.Sprintf("migration %s was dead-lettered; stopping (on_migration_failure: stop); %d migration(s) not started", j.migration, len(j.pending)))
		case len(j.pending) == 0 && len(j.failed) > 0:
			p.endJob(ctx, j, 1, fmt.Sprintf("%d migration(s) dead-lettered: %s", len(j.failed), strings.Join(j.failed, ", ")))
		case len(j.pending) == 0:
			p.endJob(ctx, j, 0, "every migration succeeded")
		default:
			if err := p.startNextMigration(ctx, cfg, j); err != nil {
				p.endJob(ctx, j, 1, err.Error())
			}
		}
	}
}

// finishJobs is advanceJobs for an idle loop.
func (p *Pipeline) finishJobs(ctx context.Context) { p.advanceJobs(ctx) }

func (p *Pipeline) endJob(ctx context.Context, j *job, code int32, text string) {
	p.mu.Lock()
	delete(p.jobs, j.id)
	p.mu.Unlock()
	p.emit(ctx, &decreev1.Event{Kind: decreev1.EventKind_EVENT_KIND_PROCESS_FINISHED, JobId: j.id, ExitCode: code, Text: text})
}

// chainDone reports whether no message of chain is left in the inbox.
func (p *Pipeline) chainDone(chain string) bool {
	entries, err := p.d.Store.ListInbox()
	if err != nil {
		return false
	}
	for _, e := range entries {
		if e.Chain == chain {
			return false
		}
	}
	return true
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
