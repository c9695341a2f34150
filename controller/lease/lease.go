// Package lease hands work to workers under leases. It is the domain side
// of the WorkerService: workers register sessions, hold an assignment
// stream, renew their leases by heartbeat, upload logs and report results;
// the processing loop calls Dispatch and waits for the result.
//
// A lease that is not renewed within the lease TTL is lost: Dispatch
// returns a "worker lost" result and later reports on that lease are
// refused. Completion is idempotent per lease token: a repeated report
// gets the first answer.
package lease

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/decreehq/decree/controller/logbook"
	decreev1 "github.com/decreehq/decree/proto/decree/v1"
)

// Domain errors; the gRPC layer maps them to status codes.
var (
	// ErrUnknownSession: the session id is not known (expired, or the
	// controller restarted); the worker should register again.
	ErrUnknownSession = errors.New("unknown worker session")
	// ErrUnknownLease: no such lease token.
	ErrUnknownLease = errors.New("unknown lease")
	// ErrLeaseEnded: the lease was lost or stopped; the work is void.
	ErrLeaseEnded = errors.New("lease ended")
	// ErrInvalid: the request is malformed.
	ErrInvalid = errors.New("invalid request")
	// ErrClosed: the manager is shutting down.
	ErrClosed = errors.New("lease manager closed")
	// ErrSuperseded: a newer assignment stream of the session replaced
	// this one.
	ErrSuperseded = errors.New("assignment stream superseded by a newer one")
)

// Defaults.
const (
	DefaultLeaseTTL = 10 * time.Second
	// MaxFenceMargin caps the default fence margin: a quarter of the
	// lease TTL, at least 250ms, at most 2s. It is the time allowed, after
	// a lost lease's expiry, for the worker's supervisor to finish killing
	// the attempt's processes (it starts at the expiry at the latest).
	MaxFenceMargin = 2 * time.Second
)

// Options configure a Manager.
type Options struct {
	// InstanceID is the controller's id (.decree/instance-id); a worker
	// presenting it works in place.
	InstanceID string
	// LeaseTTL is how long a lease lives without renewal (default 10s).
	LeaseTTL time.Duration
	// HeartbeatInterval is what workers are told (default LeaseTTL/3).
	HeartbeatInterval time.Duration
	// FenceMargin is how long after a lease's expiry its loss is reported
	// (a quarter of LeaseTTL within 250ms..MaxFenceMargin when zero): the worker's supervisor kills the
	// attempt's processes at the expiry at the latest (see
	// pkg/supervisor), so a retry started after the margin never overlaps
	// them.
	FenceMargin time.Duration
	// Logs stores uploaded logs; required.
	Logs *logbook.Book
	// Logger; nil discards.
	Logger *slog.Logger
	// Clock is the time source; nil means the wall clock.
	Clock Clock
	// Journal is the file listing active leases (see journal.go), so that
	// a controller restarted after a crash waits for the workers that ran
	// them; "" keeps none.
	Journal string
	// ForgetAfter is how long a worker that sends no heartbeat (and holds
	// no lease) stays registered and listed; then it is forgotten
	// (DefaultForgetAfter when zero; at least the lease TTL).
	ForgetAfter time.Duration
}

// Requirements say which workers may take an assignment.
type Requirements struct {
	// Driver must be among the worker's drivers (any when empty).
	Driver string
	// Labels must all be present with equal values.
	Labels map[string]string
	// InPlace demands a worker sharing the controller's tree.
	InPlace bool
	// Replica demands a worker with a workspace of its own (a lane's work:
	// its tree is not the controller's).
	Replica bool
	// Lane names the parallel lane the work belongs to (affinity.go).
	Lane string
}

// Result is how an assignment ended.
type Result struct {
	// Status is the worker's exit status, or the controller's verdict
	// (exit code -1) when the worker was lost.
	Status *decreev1.ExitStatus
	// Output is the router's answer (kind ROUTER).
	Output []byte
	// Files and Manifest come back from replica workers.
	Files    []*decreev1.ReturnedFile
	Manifest []*decreev1.FileEntry
	// WorkspaceReturned is set when a replica worker sent its tree after
	// the run (Manifest is then authoritative, even when empty). It is
	// never set for in-place workers.
	WorkspaceReturned bool
	// LogSizes are the byte counts the worker reported per stream.
	LogSizes map[string]uint64
	// WorkerID is the worker that held the lease.
	WorkerID string
	// Lost is set when the lease ran out: the worker stopped renewing it
	// (or did not stop in time after being asked to).
	Lost bool
	// LogsIncomplete names streams with fewer bytes stored than the
	// worker reported.
	LogsIncomplete []string
}

// Manager owns sessions and leases. It is safe for concurrent use.
//
// Fencing: a lease that expires is not reported lost at once. Its worker's
// supervisor kills the attempt's processes by the expiry at the latest
// (the worker gives it the send time of its last renewing heartbeat plus
// the TTL), so Dispatch returns the loss only FenceMargin later, and the
// caller's retry cannot overlap the lost attempt.
type Manager struct {
	opts  Options
	log   *slog.Logger
	clock Clock

	mu       sync.Mutex
	sessions map[string]*session
	leases   map[string]*lease
	pending  []*lease // waiting for a worker, FIFO
	ended    []string // tokens of ended leases, oldest first, for pruning
	closed   bool
	closing  chan struct{}
	// streamed is closed and replaced whenever a worker starts streaming.
	streamed chan struct{}
	// recovering lists, per worker, the previous controller's leases not
	// yet accounted for; non-nil while work is held back (journal.go).
	recovering map[string][]journalEntry
	holdTimer  Timer
	// fenced is closed when the hold ends (WaitFenced).
	fenced chan struct{}
	// lost and released count leases lost by expiry and handed back by
	// draining workers (Stats).
	lost, released uint64
	// reserved maps a worker id to the lane it is kept for (affinity.go).
	reserved map[string]string
}

type session struct {
	id        string
	req       *decreev1.RegisterWorkerRequest
	inPlace   bool
	lastSeen  time.Time
	lastGiven time.Time
	streamGen int
	streaming bool
	outbox    []*lease // assigned, not yet sent
	current   *lease
	changed   chan struct{} // closed and replaced when outbox or streamGen changes
	// draining: the worker is about to exit and takes no new work (Drain).
	draining bool
}

type leaseState int

const (
	statePending leaseState = iota
	stateActive
	// stateFencing: the lease expired; its loss is reported once the
	// fence margin has passed. Renewals and reports are refused.
	stateFencing
	stateEnded
)

type lease struct {
	token    string
	a        *decreev1.Assignment
	req      Requirements
	sess     *session
	state    leaseState
	expires  time.Time
	timer    Timer
	stop     bool // the controller asked the worker to stop
	done     chan struct{}
	result   Result
	resp     *decreev1.CompleteAssignmentResponse
	endNote  string // why the lease ended without a result
	logBegun bool
}

// New returns a manager.
func New(opts Options) (*Manager, error) {
	if opts.Logs == nil {
		return nil, fmt.Errorf("lease manager: Options.Logs is required")
	}
	if opts.LeaseTTL <= 0 {
		opts.LeaseTTL = DefaultLeaseTTL
	}
	if opts.HeartbeatInterval <= 0 {
		opts.HeartbeatInterval = opts.LeaseTTL / 3
	}
	if opts.ForgetAfter <= 0 {
		opts.ForgetAfter = DefaultForgetAfter
	}
	opts.ForgetAfter = max(opts.ForgetAfter, opts.LeaseTTL)
	if opts.FenceMargin <= 0 {
		opts.FenceMargin = min(max(opts.LeaseTTL/4, 250*time.Millisecond), MaxFenceMargin)
	}
	l := opts.Logger
	if l == nil {
		l = slog.New(slog.DiscardHandler)
	}
	clock := opts.Clock
	if clock == nil {
		clock = realClock{}
	}
	m := &Manager{opts: opts, log: l, clock: clock, sessions: map[string]*session{}, leases: map[string]*lease{}, closing: make(chan struct{}), streamed: make(chan struct{})}
	if err := m.recoverJournal(); err != nil {
		return nil, err
	}
	return m, nil
}

func newToken() string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(fmt.Sprintf("crypto/rand failed: %v", err))
	}
	return hex.EncodeToString(b[:])
}

func broadcast(ch *chan struct{}) {
	close(*ch)
	*ch = make(chan struct{})
}

func checkWorkerID(id string) error {
	if id == "" || len(id) > 128 {
		return fmt.Errorf("%w: worker_id must be 1 to 128 characters, got %d", ErrInvalid, len(id))
	}
	for _, r := range id {
		if unicode.IsControl(r) || unicode.IsSpace(r) {
			return fmt.Errorf("%w: worker_id %q contains spaces or control characters", ErrInvalid, id)
		}
	}
	return nil
}

// Register opens a session for a worker. A worker that registers again
// with the same worker_id (after a reconnect) replaces its old session and
// keeps its leases; their renewal continues under the new session.
func (m *Manager) Register(req *decreev1.RegisterWorkerRequest) (*decreev1.RegisterWorkerResponse, error) {
	if err := checkWorkerID(req.GetWorkerId()); err != nil {
		return nil, err
	}
	for _, d := range req.GetDrivers() {
		if strings.TrimSpace(d.GetName()) == "" {
			return nil, fmt.Errorf("%w: worker %s lists a driver without a name", ErrInvalid, req.GetWorkerId())
		}
	}
	if err := checkRegistration(req); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, ErrClosed
	}
	m.forgetLocked(m.clock.Now())
	s := &session{
		id:       newToken(),
		req:      req,
		inPlace:  req.GetWorkspaceInstanceId() != "" && req.GetWorkspaceInstanceId() == m.opts.InstanceID,
		lastSeen: m.clock.Now(),
		changed:  make(chan struct{}),
	}
	for id, old := range m.sessions {
		if old.req.GetWorkerId() != req.GetWorkerId() {
			continue
		}
		if old.current != nil && old.current.state == stateActive {
			s.current = old.current
			s.current.sess = s
		}
		for _, l := range old.outbox {
			// Never delivered on the old stream: deliver on the new one.
			if l.state == stateActive {
				s.outbox = append(s.outbox, l)
			}
		}
		old.outbox = nil
		old.current = nil
		old.streamGen++
		broadcast(&old.changed)
		delete(m.sessions, id)
	}
	m.sessions[s.id] = s
	m.log.Info("worker registered", "worker", req.GetWorkerId(), "session", s.id, "in_place", s.inPlace, "host", req.GetHostname())
	return &decreev1.RegisterWorkerResponse{
		SessionId:         s.id,
		HeartbeatInterval: durationProto(m.opts.HeartbeatInterval),
		LeaseTtl:          durationProto(m.opts.LeaseTTL),
		InPlace:           s.inPlace,
	}, nil
}

// Close ends every session and fails waiting dispatches with ErrClosed.
func (m *Manager) Close() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return
	}
	m.closed = true
	close(m.closing)
	if m.holdTimer != nil {
		m.holdTimer.Stop()
	}
	for _, l := range m.leases {
		if l.state != stateEnded {
			m.endLocked(l, Result{}, "the controller shut down")
		}
	}
	m.pending = nil
}
