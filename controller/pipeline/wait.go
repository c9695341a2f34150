package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/decreehq/decree/controller/events"
	"github.com/decreehq/decree/controller/msgstate"
	"github.com/decreehq/decree/controller/store"
	"github.com/decreehq/decree/pkg/layout"
	"github.com/decreehq/decree/pkg/message"
)

// Waiting for a person: the loop's side (the machine's is msgstate/wait.go,
// the question's stage_ask.go).
//
// When Next says StepWait, the loop lets the message go (errWaiting): its
// worker and lease are long released, the message stays in the inbox, and
// the scheduler leaves its chain alone (waitingChain) while other chains,
// cron and submissions go on. The waits are kept in memory with the run
// they belong to (p.waits), rebuilt from the runs' state at the start.
//
// A reply (Reply: from the API, decreectl reply, or an inbox file with
// `to:` and `option:`) is checked against the machine, its note written to
// reply-<k>.md, the answer recorded in state.json and wait-<k>.json, and
// all of it made durable before Reply returns; only then is the chain
// released for the loop, which plans from the answer. A refused reply is
// appended to replies-refused.jsonl and announced as a warning; it changes
// nothing. A deadline that passes records the reserved answer timed_out
// the same way.

// errWaiting ends drive for a message that waits for a person.
var errWaiting = errors.New("waiting for a reply")

// Errors of Reply (wrapped), mapped to gRPC codes by the API.
var (
	// ErrNotWaiting: the message is not waiting, or waits under another id.
	ErrNotWaiting = errors.New("not waiting")
	// ErrBadOption: the option is not one the wait offers.
	ErrBadOption = errors.New("unknown option")
	// ErrAnswered: the wait has its answer already.
	ErrAnswered = errors.New("already answered")
)

// waitRecord is wait-<k>.json: the question and, once given, its answer.
type waitRecord struct {
	ID        string            `json:"id"`
	MessageID string            `json:"message_id"`
	Chain     string            `json:"chain"`
	Routine   string            `json:"routine,omitempty"`
	Kind      msgstate.WaitKind `json:"kind"`
	Attempt   int               `json:"attempt"`
	Question  string            `json:"question"`
	Options   []waitOption      `json:"options"`
	Asked     time.Time         `json:"asked"`
	Deadline  time.Time         `json:"deadline,omitzero"`
	Reply     *replyRecord      `json:"reply,omitempty"`
}

// replyRecord is the answer of a wait.
type replyRecord struct {
	Option    string    `json:"option"`
	Note      string    `json:"note_file,omitempty"`
	At        time.Time `json:"at"`
	Via       string    `json:"via,omitempty"`
	RequestID string    `json:"request_id,omitempty"`
}

// waitNumber is k of a wait id <message id>-w<k>.
func waitNumber(id string) int {
	i := strings.LastIndex(id, "-w")
	if i < 0 {
		return 0
	}
	k, _ := strconv.Atoi(id[i+2:])
	return k
}

func writeWaitRecord(run *store.Run, rec waitRecord) error {
	data, err := json.MarshalIndent(rec, "", "  ")
	if err != nil {
		return err
	}
	return run.WriteFile(layout.WaitFileName(waitNumber(rec.ID)), append(data, '\n'))
}

func readWaitRecord(run *store.Run, k int) (waitRecord, error) {
	var rec waitRecord
	p, err := run.Path(layout.WaitFileName(k))
	if err != nil {
		return rec, err
	}
	data, err := os.ReadFile(p)
	if err != nil {
		return rec, err
	}
	return rec, json.Unmarshal(data, &rec)
}

// WaitInfo is a message waiting for a person, for listings.
type WaitInfo struct {
	ID        string
	MessageID string
	Chain     string
	Routine   string
	Kind      string
	Attempt   int
	Question  string
	Options   []WaitOption
	Asked     time.Time
	Deadline  time.Time
}

// WaitOption is an option of a wait with what it means.
type WaitOption struct{ Name, Meaning string }

// parked is a wait the loop let go of.
type parked struct {
	rec   waitRecord
	file  string
	run   *store.Run
	timer *time.Timer
}

// waits are the messages waiting for a person, by message id.
type waits struct {
	mu     sync.Mutex // serialises replies, time-outs and parking
	once   sync.Once
	byID   map[string]*parked
	chains map[string]int
}

// waitingChain reports whether chain has a message waiting for a person
// (the scheduler leaves such chains alone).
func (p *Pipeline) waitingChain(chain string) bool {
	p.loadWaits()
	p.w.mu.Lock()
	defer p.w.mu.Unlock()
	return p.w.chains[chain] > 0
}

// excluded is the scheduler's Exclude: chains of pending migrations not
// yet started and chains waiting for a person.
func (p *Pipeline) excluded(chain string) bool {
	return p.heldChain(chain) || p.waitingChain(chain)
}

// park registers a waiting message and lets it go: the first time in
// this controller it announces the wait and runs the onWait hook.
func (p *Pipeline) park(ctx context.Context, m *msg, announce bool) error {
	v := m.run.Machine()
	if !v.Pending() {
		return fmt.Errorf("park %s: it does not wait", m.e.ID)
	}
	// The wait is durable before anyone is told about it.
	if err := m.run.Commit(); err != nil {
		return err
	}
	rec, err := readWaitRecord(m.run, waitNumber(v.Wait.ID))
	if err != nil || rec.ID != v.Wait.ID {
		// The record is written before the wait; rebuild a lost one.
		rec = waitRecord{ID: v.Wait.ID, MessageID: m.e.ID, Chain: m.e.Chain, Kind: v.Wait.Kind, Attempt: v.Wait.Attempt,
			Question: v.Wait.Question, Deadline: v.Wait.Deadline, Asked: time.Now()}
		for _, o := range v.Wait.Options {
			rec.Options = append(rec.Options, waitOption{Name: o})
		}
	}
	p.loadWaits()
	p.w.mu.Lock()
	_, known := p.w.byID[m.e.ID]
	if !known {
		p.addWaitLocked(&parked{rec: rec, file: m.e.File, run: m.run})
	}
	p.w.mu.Unlock()
	if announce && !known {
		p.emit(ctx, &events.Event{Kind: events.Waiting, MessageID: m.e.ID, Chain: m.e.Chain, Attempt: rec.Attempt,
			WaitID: rec.ID, Until: rec.Deadline, Routine: rec.Routine, Text: rec.Question})
		if m.cfg != nil && m.cfg.Hooks.OnWait != "" {
			if msg := p.runWaitHook(ctx, m, rec); msg != "" {
				p.warn(ctx, m.e.ID, "onWait hook failed: "+msg)
			}
		}
	}
	if !known && !rec.Deadline.IsZero() && !rec.Deadline.After(time.Now()) {
		p.timeOut(ctx, m.e.ID, rec.ID) // no timer was armed for a deadline already past
	}
	return errWaiting
}

// runWaitHook runs onWait with the wait in its environment.
func (p *Pipeline) runWaitHook(ctx context.Context, m *msg, rec waitRecord) string {
	env := map[string]string{"DECREE_HOOK": "onWait", "DECREE_TRIGGER": trigger(m.e),
		"DECREE_WAIT_ID": rec.ID, "DECREE_WAIT_KIND": string(rec.Kind), "DECREE_QUESTION": rec.Question,
		"DECREE_OPTIONS": strings.Join(optionNames(rec.Options), ","), "DECREE_REPLY_COMMAND": replyCommand(rec.ID)}
	if !rec.Deadline.IsZero() {
		env["DECREE_DEADLINE"] = rec.Deadline.UTC().Format(time.RFC3339)
	}
	return p.runHook(ctx, m.cfg, "onWait", m.cfg.Hooks.OnWait, &m.e, m.run, env, rec.Attempt)
}

func optionNames(opts []waitOption) []string {
	out := make([]string, len(opts))
	for i, o := range opts {
		out[i] = o.Name
	}
	return out
}

// replyCommand is the command that answers wait id.
func replyCommand(id string) string { return "decreectl reply " + id + " OPTION [-m NOTE]" }

// addWaitLocked registers w and arms its deadline. p.w.mu is held.
func (p *Pipeline) addWaitLocked(w *parked) {
	p.w.byID[w.rec.MessageID] = w
	p.w.chains[w.rec.Chain]++
	if !w.rec.Deadline.IsZero() && w.rec.Deadline.After(time.Now()) {
		id, wid := w.rec.MessageID, w.rec.ID
		w.timer = time.AfterFunc(time.Until(w.rec.Deadline), func() { p.timeOut(context.Background(), id, wid) })
	}
}

// dropWaitLocked forgets the wait of message id. p.w.mu is held.
func (p *Pipeline) dropWaitLocked(id string) {
	w, ok := p.w.byID[id]
	if !ok {
		return
	}
	if w.timer != nil {
		w.timer.Stop()
	}
	delete(p.w.byID, id)
	if p.w.chains[w.rec.Chain]--; p.w.chains[w.rec.Chain] <= 0 {
		delete(p.w.chains, w.rec.Chain)
	}
}

// forgetWait drops the wait of a message cancelled or filed meanwhile.
func (p *Pipeline) forgetWait(id string) {
	p.loadWaits()
	p.w.mu.Lock()
	p.dropWaitLocked(id)
	p.w.mu.Unlock()
}

// loadWaits finds, once, the messages that were waiting when the
// controller last stopped.
func (p *Pipeline) loadWaits() {
	p.w.once.Do(func() {
		// Deadlines that passed while no controller ran are recorded
		// before anything asks about the waits.
		var expired []waitRecord
		defer func() {
			for _, rec := range expired {
				p.timeOut(context.Background(), rec.MessageID, rec.ID)
			}
		}()
		p.w.mu.Lock()
		defer p.w.mu.Unlock()
		p.w.byID, p.w.chains = map[string]*parked{}, map[string]int{}
		for _, id := range p.d.Store.UnfinishedRuns() {
			run, err := p.d.Store.OpenRun(id)
			if err != nil {
				continue
			}
			v := run.Machine()
			if !v.Pending() || !p.inInbox(run.State().File) {
				continue
			}
			rec, err := readWaitRecord(run, waitNumber(v.Wait.ID))
			if err != nil || rec.ID != v.Wait.ID {
				rec = waitRecord{ID: v.Wait.ID, MessageID: id, Kind: v.Wait.Kind, Attempt: v.Wait.Attempt, Question: v.Wait.Question, Deadline: v.Wait.Deadline}
				rec.Chain, _, _ = strings.Cut(id, "-")
				for _, o := range v.Wait.Options {
					rec.Options = append(rec.Options, waitOption{Name: o})
				}
			}
			p.addWaitLocked(&parked{rec: rec, file: run.State().File, run: run})
			if !rec.Deadline.IsZero() && !rec.Deadline.After(time.Now()) {
				expired = append(expired, rec)
			}
		}
	})
}

// Waits lists the messages waiting for a person, oldest first.
func (p *Pipeline) Waits() []WaitInfo {
	p.loadWaits()
	p.w.mu.Lock()
	defer p.w.mu.Unlock()
	out := make([]WaitInfo, 0, len(p.w.byID))
	for _, w := range p.w.byID {
		out = append(out, waitInfo(w.rec))
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].Asked.Equal(out[j].Asked) {
			return out[i].Asked.Before(out[j].Asked)
		}
		return out[i].ID < out[j].ID
	})
	return out
}

func waitInfo(rec waitRecord) WaitInfo {
	wi := WaitInfo{ID: rec.ID, MessageID: rec.MessageID, Chain: rec.Chain, Routine: rec.Routine, Kind: string(rec.Kind),
		Attempt: rec.Attempt, Question: rec.Question, Asked: rec.Asked, Deadline: rec.Deadline}
	for _, o := range rec.Options {
		wi.Options = append(wi.Options, WaitOption(o))
	}
	return wi
}

// ReplyRequest is one reply.
type ReplyRequest struct {
	// To is a wait id (<message id>-w<k>) or a message id (its current
	// wait).
	To     string
	Option string
	Note   []byte
	// RequestID makes a retried reply safe: the same id with the same
	// answer is acknowledged again instead of refused as a duplicate.
	RequestID string
	// Via says where the reply came from (api, inbox file ...), for the
	// record.
	Via string
}

var waitIDRe = regexp.MustCompile(`^([0-9]{16}-[0-9]+)-w([0-9]+)$`)

// Reply records an answer to a wait; see the top of this file.
func (p *Pipeline) Reply(ctx context.Context, req ReplyRequest) (WaitInfo, error) {
	msgID, waitID := req.To, ""
	if m := waitIDRe.FindStringSubmatch(req.To); m != nil {
		msgID, waitID = m[1], req.To
	}
	if err := store.CheckID(msgID); err != nil {
		return WaitInfo{}, fmt.Errorf("%w: %q is neither a wait id (<message id>-w<k>) nor a message id", ErrNotFound, req.To)
	}
	p.loadWaits()
	// A message between its attempt's end and being let go is not
	// registered yet: give the loop a moment.
	deadline := time.Now().Add(5 * time.Second)
	for {
		p.w.mu.Lock()
		w, ok := p.w.byID[msgID]
		if ok {
			defer p.w.mu.Unlock()
			return p.replyLocked(ctx, w, waitID, req)
		}
		p.w.mu.Unlock()
		run, err := p.d.Store.OpenRun(msgID)
		if err != nil {
			return WaitInfo{}, p.refuseReply(ctx, nil, msgID, req, fmt.Errorf("%w: message %s has not run (no run directory), so it asked nothing", ErrNotWaiting, msgID))
		}
		v := run.Machine()
		if rec, ok := sameRequest(run, v, waitID, req); ok {
			return waitInfo(rec), nil // a retried request: acknowledged again
		}
		if !v.Pending() || time.Now().After(deadline) || ctx.Err() != nil {
			return WaitInfo{}, p.refuseReply(ctx, run, msgID, req, notWaiting(run, v, waitID))
		}
		select {
		case <-ctx.Done():
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// notWaiting explains why a message takes no reply now.
func notWaiting(run *store.Run, v msgstate.Msg, waitID string) error {
	if waitID == "" && v.State == msgstate.Waiting && v.Wait != nil {
		waitID = v.Wait.ID // answered, not yet acted on
	}
	if waitID != "" {
		if k := waitNumber(waitID); k >= 1 && k <= v.Waited {
			if rec, err := readWaitRecord(run, k); err == nil && rec.Reply != nil {
				if rec.Reply.Option == msgstate.OptionTimedOut {
					return fmt.Errorf("%w: wait %s timed out at %s before any reply came", ErrNotWaiting, waitID, rec.Reply.At.Format(time.RFC3339))
				}
				return fmt.Errorf("%w: wait %s was answered %q at %s", ErrAnswered, waitID, rec.Reply.Option, rec.Reply.At.Format(time.RFC3339))
			}
		}
	}
	st := run.State()
	state := string(v.State)
	if st.Outcome != "" {
		state = st.Outcome
	}
	return fmt.Errorf("%w: message %s is %s, not waiting for a reply", ErrNotWaiting, run.ID(), state)
}

// replyLocked checks and records a reply to a registered wait. p.w.mu is
// held.
func (p *Pipeline) replyLocked(ctx context.Context, w *parked, waitID string, req ReplyRequest) (WaitInfo, error) {
	run := w.run
	v := run.Machine()
	if waitID == "" {
		waitID = w.rec.ID
	}
	if waitID != w.rec.ID {
		return WaitInfo{}, p.refuseReply(ctx, run, w.rec.MessageID, req, notWaiting(run, v, waitID))
	}
	next, err := msgstate.Reply(v, waitID, req.Option, req.RequestID)
	if err != nil {
		switch {
		case errors.Is(err, msgstate.ErrUnknownOption):
			err = fmt.Errorf("%w %q: wait %s offers %s", ErrBadOption, req.Option, waitID, strings.Join(optionNames(w.rec.Options), ", "))
		case errors.Is(err, msgstate.ErrReplied):
			err = fmt.Errorf("%w: %v", ErrAnswered, err)
		default:
			err = fmt.Errorf("%w: %v", ErrNotWaiting, err)
		}
		return WaitInfo{}, p.refuseReply(ctx, run, w.rec.MessageID, req, err)
	}
	k := waitNumber(waitID)
	rec := w.rec
	rec.Reply = &replyRecord{Option: req.Option, Note: layout.ReplyFileName(k), At: time.Now(), Via: req.Via, RequestID: req.RequestID}
	// The note and the record first, then the machine, then one fsync of
	// them all: the reply is durable before it is acknowledged.
	if err := run.WriteFile(layout.ReplyFileName(k), req.Note); err != nil {
		return WaitInfo{}, fmt.Errorf("record the reply to %s: %w", waitID, err)
	}
	if err := writeWaitRecord(run, rec); err != nil {
		return WaitInfo{}, fmt.Errorf("record the reply to %s: %w", waitID, err)
	}
	if rec.Kind == msgstate.ReviewWait && req.Option != msgstate.OptionApprove {
		discardHeld(run, rec.Attempt)
	}
	if rec.Kind == msgstate.ReviewWait && req.Option == msgstate.OptionRetry {
		text := fmt.Sprintf("# Review of attempt %d: retry\n\nA reviewer asked for another attempt of %s. Their note:\n\n%s\n", rec.Attempt, rec.MessageID, strings.TrimSpace(string(req.Note)))
		if err := run.WriteFile(layout.FailureContextFile, []byte(text)); err != nil {
			return WaitInfo{}, fmt.Errorf("record the reply to %s: %w", waitID, err)
		}
	}
	if _, err := run.Step(func(msgstate.Msg) (msgstate.Msg, error) { return next, nil }); err != nil {
		return WaitInfo{}, fmt.Errorf("record the reply to %s: %w", waitID, err)
	}
	if err := run.Commit(); err != nil {
		return WaitInfo{}, fmt.Errorf("record the reply to %s: %w", waitID, err)
	}
	w.rec = rec
	p.dropWaitLocked(rec.MessageID)
	p.emit(ctx, &events.Event{Kind: events.Replied, MessageID: rec.MessageID, Chain: rec.Chain, Attempt: rec.Attempt,
		WaitID: rec.ID, Text: req.Option})
	p.Wake()
	return waitInfo(rec), nil
}

// refuseReply records a refused reply (in the run directory when the
// message has one, and as a warning) and returns err.
func (p *Pipeline) refuseReply(ctx context.Context, run *store.Run, msgID string, req ReplyRequest, err error) error {
	if run != nil {
		line, _ := json.Marshal(map[string]any{"at": time.Now(), "to": req.To, "option": req.Option, "via": req.Via,
			"request_id": req.RequestID, "refused": err.Error()})
		if p2, perr := run.Path(layout.RefusedReplies); perr == nil {
			if f, ferr := os.OpenFile(p2, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644); ferr == nil {
				_, _ = f.Write(append(line, '\n'))
				_ = f.Sync()
				f.Close()
			}
		}
	}
	id := msgID
	if store.CheckID(id) != nil {
		id = ""
	}
	p.warn(ctx, id, fmt.Sprintf("reply %q to %s refused: %v", req.Option, req.To, err))
	return err
}

// timeOut records that wait wid of message id got no reply in time.
func (p *Pipeline) timeOut(ctx context.Context, id, wid string) {
	p.w.mu.Lock()
	defer p.w.mu.Unlock()
	w, ok := p.w.byID[id]
	if !ok || w.rec.ID != wid {
		return
	}
	run, rec := w.run, w.rec
	rec.Reply = &replyRecord{Option: msgstate.OptionTimedOut, At: time.Now(), Via: "deadline"}
	why := fmt.Sprintf("no reply came to wait %s by its deadline %s", wid, rec.Deadline.UTC().Format(time.RFC3339))
	text := fmt.Sprintf("# No reply\n\nAttempt %d of %s waited for a reply that did not come: %s. Its question was:\n\n%s\n\nThis attempt sees DECREE_REPLY=%s.\n",
		rec.Attempt, id, why, rec.Question, msgstate.OptionTimedOut)
	discardHeld(run, rec.Attempt)
	err := writeWaitRecord(run, rec)
	if err == nil {
		err = run.WriteFile(layout.FailureContextFile, []byte(text))
	}
	if err == nil {
		err = run.Update(func(st *store.RunState) error {
			if n := rec.Attempt; n >= 1 && n <= len(st.Attempts) {
				st.Attempts[n-1].Status, st.Attempts[n-1].Error = store.AttemptFailed, why
			}
			return nil
		})
	}
	if err == nil {
		_, err = run.Step(func(v msgstate.Msg) (msgstate.Msg, error) { return msgstate.TimeOut(v, wid) })
	}
	if err == nil {
		err = run.Commit()
	}
	if err != nil {
		p.log.Error("record a wait's time-out; trying again in a minute", "wait", wid, "err", err)
		w.timer = time.AfterFunc(time.Minute, func() { p.timeOut(context.Background(), id, wid) })
		return
	}
	p.dropWaitLocked(id)
	p.emit(ctx, &events.Event{Kind: events.TimedOut, MessageID: id, Chain: rec.Chain, Attempt: rec.Attempt, WaitID: wid, Until: rec.Deadline, Text: why})
	p.Wake()
}

// reject reverts a change a reviewer rejected and dead-letters it.
func (p *Pipeline) reject(ctx context.Context, m *msg) error {
	if err := p.record(m, func(v msgstate.Msg) (msgstate.Msg, error) { return msgstate.Revert(v, msgstate.ForReject) }); err != nil {
		return err
	}
	if err := p.revert(ctx, m.run, m.manifest); err != nil {
		return p.afterRevertError(ctx, m, err)
	}
	if err := p.record(m, func(v msgstate.Msg) (msgstate.Msg, error) { return msgstate.Kill(v, msgstate.Rejected) }); err != nil {
		return err
	}
	v := m.run.Machine()
	note := ""
	if v.Wait != nil {
		if p2, err := m.run.Path(layout.ReplyFileName(v.Waited)); err == nil {
			if b, err := os.ReadFile(p2); err == nil {
				note = strings.TrimSpace(string(b))
			}
		}
	}
	if note == "" {
		note = "(no note)"
	}
	m.note = &store.DeadNote{Reason: string(msgstate.Rejected), MessageID: m.e.ID,
		Detail: fmt.Sprintf("A reviewer rejected the change of attempt %d; the tree was reverted to the checkpoint. Their note:\n\n%s\n\nRequeue the message to run it again.", v.Attempt, note)}
	return p.file(ctx, m)
}

// holdFollowUps keeps the follow-ups of an attempt awaiting review out of
// the inbox and outbox until it is approved.
func (p *Pipeline) holdFollowUps(run *store.Run, before store.InboxSnapshot) {
	held := filepath.Join(run.Dir(), layout.HeldFollowUps)
	p.moveFollowUps(before, filepath.Join(held, layout.Inbox), filepath.Join(held, layout.Outbox))
}

// restoreHeld puts an approved attempt's follow-ups back in place, to be
// collected; it can be repeated.
func (p *Pipeline) restoreHeld(run *store.Run) error {
	held := filepath.Join(run.Dir(), layout.HeldFollowUps)
	for _, area := range []string{layout.Inbox, layout.Outbox} {
		ents, err := os.ReadDir(filepath.Join(held, area))
		if err != nil {
			continue
		}
		for _, de := range ents {
			if de.Name() == snapshotMarker {
				continue
			}
			dst := layout.Path(p.d.Store.Root(), area, de.Name())
			if _, err := os.Lstat(dst); err == nil {
				continue
			}
			if err := os.Rename(filepath.Join(held, area, de.Name()), dst); err != nil {
				return fmt.Errorf("put back the follow-up %s: %w", de.Name(), err)
			}
		}
	}
	return nil
}

// maxReplyNote bounds a reply's note.
const maxReplyNote = 1 << 20

// replyFromInbox handles an inbox file addressed to a wait (`to:` and
// `option:` in its frontmatter, the note as its body): the same path as
// Reply. An accepted reply's file goes to done/, a refused one to dead/
// with the reason (InvalidReply).
func (p *Pipeline) replyFromInbox(ctx context.Context, e store.Entry) {
	path := layout.Path(p.d.Store.Root(), layout.Inbox, e.File)
	var note []byte
	data, err := os.ReadFile(path)
	if err == nil {
		var mm *message.Message
		if mm, err = message.Parse(data); err == nil {
			note = mm.Body
		}
	}
	req := ReplyRequest{To: e.Message.GetString("to"), Option: e.Message.GetString("option"), Note: note,
		RequestID: e.Message.GetString("request_id"), Via: "inbox file " + e.File}
	switch {
	case err != nil:
		err = fmt.Errorf("read the reply: %w", err)
	case len(note) > maxReplyNote:
		err = fmt.Errorf("%w: the note is larger than %d KiB", ErrBadOption, maxReplyNote>>10)
	case req.Option == "":
		err = p.refuseReply(ctx, nil, "", req, fmt.Errorf("%w: the reply has `to: %s` but no `option:`", ErrBadOption, req.To))
	default:
		_, err = p.Reply(ctx, req)
	}
	if err == nil {
		if _, err := p.d.Store.MarkDone(e.File); err != nil {
			p.log.Error("move an accepted reply to done/", "file", e.File, "err", err)
		}
		return
	}
	p.deadLetterUnrun(ctx, e, store.DeadNote{Reason: "InvalidReply", MessageID: e.ID,
		Detail: fmt.Sprintf("This file is a reply (to: %s, option: %s), and it was refused: %v\nNothing was changed. `decreectl waits` lists what waits for a reply.", req.To, req.Option, err)})
}

// ExitWaiting is the exit code of a process job (and of `decreectl run`
// and `process`) that ended with messages waiting for a reply.
const ExitWaiting = 3

// onlyWaiting reports whether every chain of chains still queued waits
// for a person.
func (p *Pipeline) onlyWaiting(chains map[string]bool) bool {
	for c := range chains {
		if !p.chainDone(c) && !p.waitingChain(c) {
			return false
		}
	}
	return true
}

// discardHeld keeps the held follow-ups of attempt n, not approved, with
// the discarded ones.
func discardHeld(run *store.Run, n int) {
	held := filepath.Join(run.Dir(), layout.HeldFollowUps)
	if _, err := os.Stat(held); err != nil {
		return
	}
	dst := filepath.Join(run.Dir(), layout.DiscardedDir(n))
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err == nil {
		_ = os.Rename(held, dst)
	}
}

// sameRequest reports whether req (with a request id) is the reply
// already recorded for its wait: a client's retry after a lost answer.
func sameRequest(run *store.Run, v msgstate.Msg, waitID string, req ReplyRequest) (waitRecord, bool) {
	if req.RequestID == "" {
		return waitRecord{}, false
	}
	k := v.Waited
	if waitID != "" {
		k = waitNumber(waitID)
	}
	if k < 1 || k > v.Waited {
		return waitRecord{}, false
	}
	rec, err := readWaitRecord(run, k)
	if err != nil || rec.Reply == nil || rec.Reply.RequestID != req.RequestID || rec.Reply.Option != req.Option {
		return waitRecord{}, false
	}
	return rec, true
}

// snapshotMarker, in the held follow-ups' directory, says the inbox
// snapshot of an approval is recorded (restoring may have begun).
const snapshotMarker = ".snapshot-recorded"

// collectApproved collects the follow-ups of an approved attempt. The
// inbox may have changed a lot while the review waited (other chains'
// follow-ups queued), so the snapshot taken before the attempt no longer
// says what is new: a fresh one is recorded first (once: a replay after a
// crash uses it), then the held follow-ups go back and are collected
// against it.
func (p *Pipeline) collectApproved(ctx context.Context, m *msg) error {
	held := filepath.Join(m.run.Dir(), layout.HeldFollowUps)
	marker := filepath.Join(held, snapshotMarker)
	before, ok := store.InboxSnapshot{}, false
	if _, err := os.Stat(marker); err == nil {
		before, ok = m.run.InboxSnapshot()
	}
	if !ok {
		snap, err := p.d.Store.SnapshotInbox()
		if err != nil {
			return err
		}
		defer p.d.Store.ReleaseSnapshot()
		if err := m.run.RecordInboxSnapshot(snap); err != nil {
			return err
		}
		if err := m.run.Commit(); err != nil {
			return err
		}
		if err := os.MkdirAll(held, 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(marker, nil, 0o644); err != nil {
			return err
		}
		before = snap
	}
	if err := p.restoreHeld(m.run); err != nil {
		return err
	}
	return p.collect(ctx, m, before)
}
