package pipeline

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/decreehq/decree/controller/store"
	"github.com/decreehq/decree/pkg/config"
	"github.com/decreehq/decree/pkg/fsutil"
	"github.com/decreehq/decree/pkg/message"
	"github.com/decreehq/decree/pkg/routine"
)

// Service is what clients ask of a project: submit (once per request id),
// cancel, requeue, revert. The gRPC API (controller/rpc) and through it the
// dashboard and decreectl call it; each of its methods validates, does one
// thing, and returns domain errors (ErrInvalid, ErrPrecondition,
// ErrAlreadyExists, ErrNotFound, ErrConflict, ErrBusy, ErrStopping) that
// rpc.Status maps to status codes in one place. The processing loop
// (Pipeline) does the work.
type Service struct {
	p     *Pipeline
	locks keyLocks
}

// NewService returns the service of p's project.
func NewService(p *Pipeline) *Service { return &Service{p: p} }

// Pipeline returns the loop behind the service.
func (s *Service) Pipeline() *Pipeline { return s.p }

// ErrPrecondition is returned (wrapped) when the project's state forbids
// a request as asked (an unknown or disabled routine).
var ErrPrecondition = errors.New("failed precondition")

// ErrAlreadyExists is returned (wrapped) for a request id already used for
// a different request.
var ErrAlreadyExists = errors.New("already exists")

// SubmitRequest is a submission with its idempotency key.
type SubmitRequest struct {
	Submission
	// RequestID, when set, makes the submission happen at most once: a
	// repeated call with the same id and the same Digest gets the first
	// call's answer; with another Digest it fails with ErrAlreadyExists.
	RequestID string
	// Digest identifies what is asked (name, fields, body), request id
	// aside.
	Digest string
	// Answer renders the first call's answer for the record; a replay
	// returns it as Submitted.Answer.
	Answer func(store.Entry) []byte
}

// Submitted is the answer to a submission.
type Submitted struct {
	Entry store.Entry
	// Seq is the event sequence to watch the message from.
	Seq      uint64
	Replayed bool
	// Answer is the first call's rendered answer (replays), when recorded;
	// Record is the request record (replays).
	Answer []byte
	Record store.Request
}

// Submit validates and queues a root message, once per request id. The
// request record is written before the message, so a controller stopped in
// between finds the chain it reserved and the message (if it was written)
// on the retry.
func (s *Service) Submit(ctx context.Context, req SubmitRequest) (Submitted, error) {
	if err := s.validate(req.Submission); err != nil {
		return Submitted{}, err
	}
	p, st := s.p, s.p.d.Store
	if req.RequestID == "" {
		e, seq, err := p.Submit(ctx, req.Submission)
		return Submitted{Entry: e, Seq: seq}, err
	}
	key := req.RequestID
	if err := store.CheckRequestID(key); err != nil {
		return Submitted{}, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	unlock := s.locks.lock(key)
	defer unlock()
	rec, found, err := st.LookupRequest(key)
	if err != nil {
		return Submitted{}, err
	}
	if found && rec.Digest != req.Digest {
		id := rec.MessageID
		if id == "" {
			id = "being queued"
		}
		return Submitted{}, fmt.Errorf("%w: request_id %q was used for a different submission (message %s); use a new request_id for a new message", ErrAlreadyExists, key, id)
	}
	if found && rec.MessageID == "" {
		// The controller stopped between reserving the chain and recording
		// the message: the message may or may not have been written.
		if id, file, ok := st.FindChainRoot(rec.Chain); ok {
			rec.MessageID, rec.File = id, file
			if err := st.SaveRequest(rec); err != nil {
				return Submitted{}, err
			}
		}
	}
	if found && rec.MessageID != "" {
		return Submitted{Seq: rec.Sequence, Replayed: true, Answer: rec.Response, Record: rec}, nil
	}
	if !found {
		rec = store.Request{Key: key, Digest: req.Digest, Chain: st.ReserveChain()}
		if err := st.SaveRequest(rec); err != nil {
			return Submitted{}, err
		}
	}
	sub := req.Submission
	sub.Chain = rec.Chain
	e, seq, err := p.Submit(ctx, sub)
	if err != nil {
		return Submitted{}, err
	}
	rec.MessageID, rec.File, rec.Sequence = e.ID, e.File, seq
	if req.Answer != nil {
		rec.Response = req.Answer(e)
	}
	if err := st.SaveRequest(rec); err != nil {
		return Submitted{}, err
	}
	return Submitted{Entry: e, Seq: seq}, nil
}

// Validate refuses, before anything is queued (or a streamed body read),
// what could never run: a bad name or key (ErrInvalid), and a routine that
// does not exist or is disabled (ErrPrecondition, naming the routines there
// are).
func (s *Service) Validate(sub Submission) error { return s.validate(sub) }

func (s *Service) validate(sub Submission) error {
	if sub.Name != "" {
		if err := message.CheckName(sub.Name); err != nil {
			return fmt.Errorf("%w: %s", ErrInvalid, stripSentinel(err))
		}
	}
	name := ""
	for _, f := range sub.Fields {
		if err := message.CheckFieldKey(f.Key); err != nil {
			return fmt.Errorf("%w: %v", ErrInvalid, err)
		}
		if f.Key == "routine" {
			name, _ = f.Value.(string)
		}
		if f.Key == "max_cost_usd" {
			if _, err := parseBudget(fmt.Sprint(f.Value)); err != nil {
				return fmt.Errorf("%w: %v", ErrInvalid, err)
			}
		}
	}
	if name == "" {
		// The spec's routine field, the router or default_routine decide
		// when the message runs.
		return nil
	}
	if err := fsutil.CheckName("routine", name); err != nil {
		return fmt.Errorf("%w: %s", ErrInvalid, stripSentinel(err))
	}
	cfg, err := s.p.d.Config()
	if err != nil {
		return err
	}
	lib := s.p.library(cfg)
	rt, err := lib.Resolve(name)
	if errors.Is(err, routine.ErrRoutineNotFound) {
		return fmt.Errorf("%w: routine %q does not exist; available routines: %s", ErrPrecondition, name, availableRoutines(lib, cfg))
	}
	if err != nil {
		return err
	}
	if !routine.Enabled(rt, cfg.Routines, cfg.SharedRoutines) {
		return fmt.Errorf("%w: routine %q is disabled in the project's configuration; available routines: %s", ErrPrecondition, name, availableRoutines(lib, cfg))
	}
	return nil
}

// Cancel stops a running message or dead-letters a queued one (cancel.go).
func (s *Service) Cancel(ctx context.Context, idOrFile, reason string) (store.Entry, error) {
	return s.p.Cancel(ctx, idOrFile, reason)
}

// Requeue moves a dead letter back into the inbox.
func (s *Service) Requeue(ctx context.Context, idOrFile string) (store.Entry, error) {
	return s.p.Requeue(ctx, idOrFile)
}

// Revert undoes a completed message's change.
func (s *Service) Revert(ctx context.Context, id string) ([]string, error) {
	return s.p.Revert(ctx, id)
}

// availableRoutines names the enabled routines, sorted.
func availableRoutines(lib routine.Library, cfg *config.Config) string {
	entries, err := lib.List()
	if err != nil {
		return "(cannot list them)"
	}
	var names []string
	for _, e := range entries {
		if routine.Enabled(e.Routine, cfg.Routines, cfg.SharedRoutines) && !cfg.RoutineSettingsFor(e.Name, e.Shared).Deprecated {
			names = append(names, e.Name)
		}
	}
	if len(names) == 0 {
		return "none (add one under .decree/routines/)"
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

// stripSentinel drops the "unsafe path: " prefix of fsutil errors.
func stripSentinel(err error) string {
	return strings.TrimPrefix(err.Error(), fsutil.ErrUnsafePath.Error()+": ")
}

// keyLocks serialises submissions per idempotency key, so two concurrent
// calls with one key queue one message.
type keyLocks struct {
	mu   sync.Mutex
	keys map[string]*sync.Mutex
}

func (l *keyLocks) lock(key string) func() {
	l.mu.Lock()
	if l.keys == nil {
		l.keys = map[string]*sync.Mutex{}
	}
	m, ok := l.keys[key]
	if !ok {
		m = &sync.Mutex{}
		l.keys[key] = m
	}
	l.mu.Unlock()
	m.Lock()
	return func() {
		m.Unlock()
		l.mu.Lock()
		// Another call may be waiting on m; it finds the record on disk
		// either way, so dropping the entry early costs nothing.
		delete(l.keys, key)
		l.mu.Unlock()
	}
}
