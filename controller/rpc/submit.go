package rpc

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"sync"

	"github.com/decreehq/decree/controller/pipeline"
	"github.com/decreehq/decree/controller/store"
	"github.com/decreehq/decree/pkg/auth"
	"github.com/decreehq/decree/pkg/config"
	"github.com/decreehq/decree/pkg/fsutil"
	"github.com/decreehq/decree/pkg/message"
	"github.com/decreehq/decree/pkg/routine"
	decreev1 "github.com/decreehq/decree/proto/decree/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
)

// fieldKey is what a submitted frontmatter key may look like: it becomes a
// routine parameter, so no newlines, no ':' and nothing YAML would read
// differently.
var fieldKey = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_.-]{0,127}$`)

// submitLocks serialises submissions per idempotency key, so two
// concurrent calls with one key queue one message.
type submitLocks struct {
	mu   sync.Mutex
	keys map[string]*sync.Mutex
}

func (l *submitLocks) lock(key string) func() {
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

// SubmitMessage validates and queues a root message, once per request_id.
func (s *ControllerServer) SubmitMessage(ctx context.Context, req *decreev1.SubmitMessageRequest) (*decreev1.SubmitMessageResponse, error) {
	if len(req.GetBody()) > auth.MaxBodyBytes {
		return nil, bodyTooLarge()
	}
	sub := submissionOf(req)
	if err := s.validateSubmission(sub); err != nil {
		return nil, err
	}
	sum := sha256.Sum256(req.GetBody())
	return s.submit(ctx, sub, req.GetRequestId(), submissionDigest(req, sum[:], int64(len(req.GetBody()))))
}

// submissionOf is the submission a request describes (its body in memory).
func submissionOf(req *decreev1.SubmitMessageRequest) pipeline.Submission {
	sub := pipeline.Submission{Name: req.GetName(), Body: req.GetBody()}
	for _, f := range req.GetFields() {
		sub.Fields = append(sub.Fields, message.Field{Key: f.GetKey(), Value: f.GetValue()})
	}
	return sub
}

// submit queues a validated submission, once per request_id key (every
// time when key is empty); digest identifies what it asks for.
func (s *ControllerServer) submit(ctx context.Context, sub pipeline.Submission, key, digest string) (*decreev1.SubmitMessageResponse, error) {
	if key == "" {
		e, seq, err := s.d.Pipeline.Submit(ctx, sub)
		if err != nil {
			return nil, Status(err)
		}
		return &decreev1.SubmitMessageResponse{Message: entryInfo(e), EventSequence: seq}, nil
	}
	if err := store.CheckRequestID(key); err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	unlock := s.submits.lock(key)
	defer unlock()
	rec, found, err := s.d.Store.LookupRequest(key)
	if err != nil {
		return nil, Status(err)
	}
	if found && rec.Digest != digest {
		return nil, status.Errorf(codes.AlreadyExists, "request_id %q was used for a different submission (message %s); use a new request_id for a new message", key, orPending(rec.MessageID))
	}
	if found && rec.MessageID == "" {
		// The controller stopped between reserving the chain and recording
		// the message: the message may or may not have been written.
		if id, file, ok := s.d.Store.FindChainRoot(rec.Chain); ok {
			rec.MessageID, rec.File = id, file
			if err := s.d.Store.SaveRequest(rec); err != nil {
				return nil, Status(err)
			}
		}
	}
	if found && rec.MessageID != "" {
		return s.replayed(rec)
	}
	if !found {
		rec = store.Request{Key: key, Digest: digest, Chain: s.d.Store.ReserveChain()}
		if err := s.d.Store.SaveRequest(rec); err != nil {
			return nil, Status(err)
		}
	}
	sub.Chain = rec.Chain
	e, seq, err := s.d.Pipeline.Submit(ctx, sub)
	if err != nil {
		return nil, Status(err)
	}
	info := entryInfo(e)
	rec.MessageID, rec.File, rec.Sequence = e.ID, e.File, seq
	if b, err := protojson.Marshal(info); err == nil {
		rec.Response = b
	}
	if err := s.d.Store.SaveRequest(rec); err != nil {
		return nil, Status(err)
	}
	return &decreev1.SubmitMessageResponse{Message: info, EventSequence: seq}, nil
}

// replayed answers a repeated request_id with the first call's result:
// the message as it was queued (not as it is now; GetMessage and
// WatchMessage tell that), the same event_sequence, and replayed set.
// A record without the first answer (the controller stopped between
// queuing and recording it) is answered from the message's file, with
// the state of a queued message.
func (s *ControllerServer) replayed(rec store.Request) (*decreev1.SubmitMessageResponse, error) {
	resp := &decreev1.SubmitMessageResponse{EventSequence: rec.Sequence, Replayed: true}
	if len(rec.Response) > 0 {
		var info decreev1.MessageInfo
		if err := protojson.Unmarshal(rec.Response, &info); err == nil {
			resp.Message = &info
			return resp, nil
		}
	}
	if v, err := s.d.Store.FindMessage(rec.MessageID); err == nil {
		resp.Message = messageInfo(v)
	} else {
		chain, seq, _ := message.SplitID(rec.MessageID)
		resp.Message = &decreev1.MessageInfo{Id: rec.MessageID, Chain: chain, Seq: int32(seq), Name: strings.TrimSuffix(rec.File, ".md")}
	}
	resp.Message.State, resp.Message.Attempts, resp.Message.DeadReason = decreev1.MessageState_MESSAGE_STATE_QUEUED, 0, ""
	return resp, nil
}

func orPending(id string) string {
	if id == "" {
		return "being queued"
	}
	return id
}

// submissionDigest identifies what a request asks for, request_id aside:
// its name, fields and the body given by its SHA-256 and size, so that a
// body in memory and one streamed in pieces give the same digest.
func submissionDigest(req *decreev1.SubmitMessageRequest, bodySum []byte, bodySize int64) string {
	h := sha256.New()
	fmt.Fprintf(h, "%d:%s\x00%d:%x", len(req.GetName()), req.GetName(), bodySize, bodySum)
	for _, f := range req.GetFields() {
		fmt.Fprintf(h, "\x00%d:%s=%d:%s", len(f.GetKey()), f.GetKey(), len(f.GetValue()), f.GetValue())
	}
	return hex.EncodeToString(h.Sum(nil))
}

// validateSubmission refuses, before anything is queued, what could never
// run: bad names and keys (INVALID_ARGUMENT), and a routine that does not
// exist or is disabled (FAILED_PRECONDITION, naming the routines there are).
func (s *ControllerServer) validateSubmission(sub pipeline.Submission) error {
	if sub.Name != "" {
		if err := message.CheckName(sub.Name); err != nil {
			return status.Error(codes.InvalidArgument, stripSentinel(err))
		}
	}
	for _, f := range sub.Fields {
		if !fieldKey.MatchString(f.Key) {
			return status.Errorf(codes.InvalidArgument, "field key %q is not allowed: keys are letters, digits, '_', '-' and '.', start with a letter or '_', and have at most 128 characters (no spaces, ':' or newlines)", f.Key)
		}
	}
	cfg, err := s.d.Config()
	if err != nil {
		return Status(err)
	}
	name := ""
	for _, f := range sub.Fields {
		if f.Key == "routine" {
			name, _ = f.Value.(string)
		}
	}
	if name == "" {
		// The spec's routine field, the router or default_routine decide
		// when the message runs.
		return nil
	}
	if err := fsutil.CheckName("routine", name); err != nil {
		return status.Error(codes.InvalidArgument, stripSentinel(err))
	}
	lib := routine.ProjectLibrary(s.d.Store.Root(), cfg)
	rt, err := lib.Resolve(name)
	if errors.Is(err, routine.ErrRoutineNotFound) {
		return status.Errorf(codes.FailedPrecondition, "routine %q does not exist; available routines: %s", name, availableRoutines(lib, cfg))
	}
	if err != nil {
		return Status(err)
	}
	if !routine.Enabled(rt, cfg.Routines, cfg.SharedRoutines) {
		return status.Errorf(codes.FailedPrecondition, "routine %q is disabled in the project's configuration; available routines: %s", name, availableRoutines(lib, cfg))
	}
	return nil
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
