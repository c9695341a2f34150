// Package store keeps the controller's state on disk, in the project's
// .decree/ directory: the inbox and its done/ and dead/ folders, the outbox,
// one run directory per message, processed.md and the instance id.
//
// # Crash safety
//
// Every change is a single atomic step (a temporary file fsynced and renamed
// into place, or a rename between directories followed by fsyncs of both
// directories), or a short sequence of such steps ordered so that a crash
// between any two of them leaves a state Open recognises and finishes:
//
//   - Temporary files left by an interrupted write (".<name>.tmp-*", see
//     fsutil.WriteFileAtomic) are removed by Open.
//   - Dead-lettering writes the note first and moves the message second. A
//     note whose message never arrived in dead/ is removed by Open, so a
//     message is never reported dead while it still sits in the inbox.
//   - Requeueing moves the message first and removes the note second; the
//     orphaned note is removed by Open.
//   - Follow-ups in outbox/ are rewritten in place (chain and seq set) and
//     then renamed into the inbox. A crash between the two leaves the file in
//     outbox/, where the next collection picks it up again.
//   - An attempt is recorded as started in runs/<id>/state.json before it is
//     handed to a worker, and as finished after it ended, so a restarted
//     controller knows which attempt was under way.
//
// # Dead-letter notes
//
// A dead-lettered message keeps its file, byte for byte, as
// inbox/dead/<name>.md. Beside it, inbox/dead/<name>.md.dead.txt explains why
// (see DeadNote). The note's name ends in ".txt", so the inbox scanner (which
// reads only "*.md" files) ignores it even when a user moves both files back
// into the inbox by hand; Requeue removes it.
//
// # Attempt logs
//
// Attempt 1 of a stream writes "<stream>.log" (routine.log), attempt n >= 2
// writes "<stream>.try-NNN.log" (routine.try-002.log, routine.try-010.log).
// These names sort in attempt order both byte-wise (Go, LC_ALL=C ls) and
// under locale collation that ignores punctuation ("routine.log" <
// "routine.try-..." because "l" < "t"), unlike "routine-2.log" and
// "routine-10.log". See layout.LogName.
package store

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/decreehq/decree/pkg/fsutil"
	"github.com/decreehq/decree/pkg/layout"
	"github.com/decreehq/decree/pkg/message"
)

// Options configure a Store.
type Options struct {
	// Logger receives recovery reports; nil discards them.
	Logger *slog.Logger
	// Now is the clock (time.Now when nil).
	Now func() time.Time
	// Chains hands out chain ids; a new generator on Now when nil.
	Chains *message.ChainGen
	// Location is the time zone run.json times are written in (time.Local
	// when nil).
	Location *time.Location
	// WatchInbox keeps the inbox index current from the kernel's change
	// reports (inotify; see watch.go) instead of looking at the inbox
	// directory on every listing. For a long-lived store (the
	// controller's); Close releases the watch.
	WatchInbox bool
	// DeferChains leaves inbox files that have no chain id as they are
	// (listed without an id) until AssignChains is called: a store that
	// serves only the chains submitted to it (`decreectl run`) never
	// rewrites messages it was not asked to run.
	DeferChains bool
}

// Store is the .decree/ directory of one project. Its methods are safe for
// concurrent use; changes to the inbox are serialised.
type Store struct {
	root   string // project root
	dir    string // root/.decree
	log    *slog.Logger
	now    func() time.Time
	chains *message.ChainGen
	loc    *time.Location
	id     string

	mu      sync.Mutex      // serialises inbox, outbox, dead/, done/ and processed.md changes
	skipped map[string]bool // inbox files refused but not movable (Skip)
	// reusedOpen says a summary counted the inbox from the directory
	// cache, without a listing (tests).
	reusedOpen bool
	// deferChains: chainless inbox files are listed, not rewritten.
	deferChains bool
	inbox       inboxIndex // the inbox as last listed (index.go)
	// watch reports changes to the inbox (watch.go); nil when not wanted
	// or not available.
	watch       *inboxWatch
	watchWanted bool
	// placed are the inbox files the store created or requeued since the
	// last inbox snapshot: never an attempt's follow-ups.
	placed map[string]bool

	// logsEnded, when set, waits until the logs of a run are ended (cut
	// and synced in the background): a finished run stays in the
	// open-run registry until then (see SetLogsEnded); unregistering
	// holds a channel per run still waiting, closed when it is done.
	logsEnded     func(runID string)
	unregMu       sync.Mutex
	unregistering map[string]chan struct{}

	cacheMu     sync.Mutex
	interrupted map[string]int      // message id -> interrupted attempt (0: none), see InterruptedAttempt
	open        map[string]bool     // ids of runs without an outcome (nil: not scanned yet)
	facts       map[string]dirFacts // what listings of .decree/ directories found (dircache.go)
	runIdx      *runIndex           // run ids by the stamp of runs/, see runindex.go

	runReads atomic.Int64 // state.json files read by OpenRun, see RunReads
}

// Open opens (creating when missing) the .decree/ layout under projectRoot,
// removes what interrupted writes left behind, reads or creates the
// instance id, and records every chain id on disk so new ones are greater.
func Open(projectRoot string, opts Options) (*Store, error) {
	abs, err := filepath.Abs(projectRoot)
	if err != nil {
		return nil, fmt.Errorf("open decree store: resolve project directory %q: %w", projectRoot, err)
	}
	s := &Store{
		root:        abs,
		dir:         filepath.Join(abs, layout.Dir),
		log:         opts.Logger,
		now:         opts.Now,
		chains:      opts.Chains,
		deferChains: opts.DeferChains,
		loc:         opts.Location,

		watchWanted: opts.WatchInbox,
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.now == nil {
		s.now = time.Now
	}
	if s.chains == nil {
		s.chains = message.NewChainGen(s.now)
	}
	if s.loc == nil {
		s.loc = time.Local
	}
	for _, d := range []string{layout.Inbox, layout.Done, layout.Dead, layout.Outbox, layout.Runs} {
		if err := os.MkdirAll(s.path(d), 0o755); err != nil {
			return nil, fmt.Errorf("open decree store: create %s: %w", s.path(d), err)
		}
	}
	s.loadDirCache()
	if err := s.recover(); err != nil {
		return nil, err
	}
	if err := s.loadInstanceID(); err != nil {
		return nil, err
	}
	if _, err := os.Stat(s.openRunsDir()); errors.Is(err, fs.ErrNotExist) {
		s.open = s.buildOpenRuns() // once per project: a version without the registry made it
	}
	s.chains.SetFloor(s.observeChains)
	return s, nil
}

// Close releases the inbox watch. The store stays usable: listings then
// look at the inbox directory as without a watch.
func (s *Store) Close() error {
	s.waitUnregistered()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.watchWanted = false
	if s.watch != nil {
		s.watch.close()
		s.watch = nil
	}
	return nil
}

// Root is the absolute project directory.
func (s *Store) Root() string { return s.root }

// Dir is the absolute .decree/ directory.
func (s *Store) Dir() string { return s.dir }

// InstanceID is the controller's id stored in .decree/instance-id. A worker
// whose workspace holds the same id shares the controller's tree.
func (s *Store) InstanceID() string { return s.id }

// Chains is the chain-id generator the store uses.
func (s *Store) Chains() *message.ChainGen { return s.chains }

// Location is the time zone run.json times are written in.
func (s *Store) Location() *time.Location { return s.loc }

func (s *Store) path(parts ...string) string {
	return filepath.Join(append([]string{s.dir}, parts...)...)
}

func (s *Store) loadInstanceID() error {
	p := s.path(layout.InstanceID)
	data, err := os.ReadFile(p)
	if err == nil {
		id := strings.TrimSpace(string(data))
		if id != "" {
			s.id = id
			return nil
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("open decree store: read %s: %w", p, err)
	}
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return fmt.Errorf("open decree store: generate instance id: %w", err)
	}
	s.id = hex.EncodeToString(b[:])
	if err := fsutil.WriteFileAtomic(p, []byte(s.id+"\n"), 0o644); err != nil {
		return fmt.Errorf("open decree store: write instance id: %w", err)
	}
	return nil
}

// isTemp reports whether name is a temporary file of fsutil.WriteFileAtomic.
func isTemp(name string) bool {
	return strings.HasPrefix(name, ".") && strings.Contains(name, ".tmp-")
}

// recover removes temporary files of interrupted writes and notes that lost
// their message (an interrupted dead-letter or requeue). A directory the
// directory cache knows to be clean, unchanged since, is not listed
// (dircache.go), so a long queue costs nothing here.
func (s *Store) recover() error {
	// done/ and runs/ are not swept: messages and run directories enter
	// them by rename, and nothing writes a file there; both grow with the
	// project's history.
	rels := []string{"", layout.Inbox, layout.Dead, layout.Outbox}
	// Temporary files are left by a write interrupted in a run that was
	// open: the registry names those (see openruns.go). A project without
	// it yet has every run directory looked at.
	runs, err := listNames(s.openRunsDir())
	if errors.Is(err, fs.ErrNotExist) {
		runs, err = listNames(s.path(layout.Runs))
	}
	if err != nil {
		return fmt.Errorf("open decree store: list %s: %w", s.path(layout.Runs), err)
	}
	for _, r := range runs {
		if fi, err := os.Lstat(s.path(layout.Runs, r)); err == nil && fi.IsDir() {
			rels = append(rels, filepath.Join(layout.Runs, r))
		}
	}
	for _, rel := range rels {
		if f, ok := s.cachedFacts(rel); ok && f.Clean {
			continue
		}
		ents, facts, err := s.listFacts(rel)
		if err != nil {
			return fmt.Errorf("open decree store: list %s: %w", s.path(rel), err)
		}
		if facts.Clean {
			continue
		}
		d := s.path(rel)
		for _, e := range ents {
			name := e.Name()
			if !isTemp(name) {
				continue
			}
			p := filepath.Join(d, name)
			if rel == "" && strings.HasPrefix(name, "."+layout.OpenRuns+".tmp-") {
				os.RemoveAll(p) // an open-run registry whose build was cut short
				continue
			}
			if !e.Type().IsRegular() {
				continue
			}
			if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("open decree store: remove leftover temporary file %s: %w", p, err)
			}
			s.log.Info("removed a temporary file left by an interrupted write", "path", p)
		}
		if rel == layout.Dead {
			if err := s.removeOrphanNotes(ents); err != nil {
				return err
			}
		}
	}
	return nil
}

// removeOrphanNotes removes dead-letter notes whose message is not in
// dead/ (a dead-letter interrupted before its move, a requeue before the
// note's removal).
func (s *Store) removeOrphanNotes(ents []os.DirEntry) error {
	for _, e := range ents {
		name := e.Name()
		if !strings.HasSuffix(name, layout.DeadNoteSuffix) {
			continue
		}
		msg := strings.TrimSuffix(name, layout.DeadNoteSuffix)
		if _, err := os.Lstat(s.path(layout.Dead, msg)); errors.Is(err, fs.ErrNotExist) {
			p := s.path(layout.Dead, name)
			if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("open decree store: remove orphaned note %s: %w", p, err)
			}
			s.log.Info("removed a dead-letter note whose message is not in dead/", "path", p)
		}
	}
	return fsutil.SyncDir(s.path(layout.Dead))
}

// listNames lists a directory's names, unsorted and without a stat each:
// the cheapest listing there is, for directories that may be long (the
// inbox).
func listNames(dir string) ([]string, error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return f.Readdirnames(-1)
}

// observeChains feeds every chain id found on disk to the generator, so a
// new controller (or embedded decreectl) never hands out an id already used
// in this project, even within the same second. It runs before the
// store's first new chain id (ChainGen.SetFloor), not when it opens.
//
// Run directories are named by message id and every processed message has
// one. Messages in inbox/ and dead/ may have none yet (queued, or refused
// before any attempt) and are usually named by their name, not their id:
// they are parsed for the chain. done/ is covered by runs/.
func (s *Store) observeChains() {
	for _, d := range []string{layout.Inbox, layout.Done, layout.Dead, layout.Runs} {
		names, err := listNames(s.path(d))
		if err != nil {
			continue
		}
		for _, name := range names {
			if chain, _, ok := message.SplitID(strings.TrimSuffix(name, ".md")); ok {
				s.chains.Observe(chain)
				continue
			}
			if (d == layout.Inbox || d == layout.Dead) && strings.HasSuffix(name, ".md") && !isTemp(name) {
				// readHeadFile opens regular files only.
				if c := fileChain(s.path(d, name)); c != "" {
					s.chains.Observe(c)
				}
			}
		}
	}
}

// fileChain returns the chain in a message file's frontmatter, or "" when
// the file cannot be parsed (such a message never got a chain).
func fileChain(path string) string {
	m, err := readHeadFile(path)
	if err != nil || !message.ValidChain(m.Chain()) {
		return ""
	}
	return m.Chain()
}
