// Replies to waits (see wait.go): from the API, decreectl reply, or an
// inbox file addressed to a wait.

package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strings"
	"time"

	"github.com/decreehq/decree/controller/events"
	"github.com/decreehq/decree/controller/msgstate"
	"github.com/decreehq/decree/controller/store"
	"github.com/decreehq/decree/pkg/layout"
	"github.com/decreehq/decree/pkg/message"
)

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
