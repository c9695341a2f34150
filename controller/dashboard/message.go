package dashboard

import (
	"context"
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"

	decreev1 "github.com/decreehq/decree/proto/decree/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

const (
	// bodyShown and contextShown bound the body and failure context a
	// message page shows inline; the raw links have the rest.
	bodyShown    = 64 << 10
	contextShown = 64 << 10
	// eventsShown bounds the message's event list.
	eventsShown = 200
	// filesShown bounds the diff summary on the message page.
	filesShown = 50
)

type followUp struct {
	ID   string
	Text string
	Dead bool
}

type messageView struct {
	Msg         *decreev1.MessageInfo
	Body        string
	BodySize    uint64
	BodyCut     bool
	Run         *decreev1.RunInfo
	Live        *decreev1.AttemptInfo // the running attempt
	LiveText    string
	LiveOffset  uint64
	LiveFrom    uint64
	Failure     string
	FailureCut  bool
	Files       []diffFileSum
	FilesMore   int
	FilesAdd    int
	FilesDel    int
	HasDiff     bool
	FollowUps   []followUp
	Events      []*decreev1.Event
	EventsTrunc bool
}

func (v messageView) title() string { return "Message " + v.Msg.GetId() }

func (s *Server) message(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	ctx, cancel := callCtx(r)
	defer cancel()
	live := r.URL.Query().Get("part") == "live"
	v, err := s.loadMessage(ctx, id, !live)
	if err != nil {
		s.failRPC(w, r, "read message "+id, err)
		return
	}
	if live {
		s.renderPart(w, r, http.StatusOK, "message", "live", v)
		return
	}
	s.render(w, r, http.StatusOK, "message", v)
}

// loadMessage reads what the message page shows; without full, only the
// message and its run (the part refreshed on every event).
func (s *Server) loadMessage(ctx context.Context, id string, full bool) (*messageView, error) {
	m, err := s.c.GetMessage(ctx, &decreev1.GetMessageRequest{Id: id})
	if err != nil {
		return nil, err
	}
	v := &messageView{Msg: m.GetMessage(), BodySize: m.GetBodySize()}
	id = v.Msg.GetId()
	run, err := s.c.GetRun(ctx, &decreev1.GetRunRequest{Id: id})
	if err != nil && status.Code(err) != codes.NotFound {
		return nil, err
	}
	v.Run = run.GetRun()
	if !full {
		return v, nil
	}
	body := m.GetBody()
	if m.GetBodyOmitted() {
		body, _ = s.readBody(ctx, id, bodyShown)
	}
	if len(body) > bodyShown {
		body = body[:bodyShown]
	}
	v.Body, v.BodyCut = strings.ToValidUTF8(string(body), "\uFFFD"), uint64(len(body)) < v.BodySize
	atts := v.Run.GetAttemptDetails()
	if v.Run.GetOutcome() == decreev1.RunOutcome_RUN_OUTCOME_RUNNING && len(atts) > 0 {
		last := atts[len(atts)-1]
		if !ended(last) {
			v.Live = last
			if size, err := s.artifactSize(ctx, id, last.GetLogName()); err == nil {
				if size > liveTail {
					v.LiveFrom = size - liveTail
				}
				data, _, err := s.readArtifact(ctx, id, last.GetLogName(), v.LiveFrom, liveTail)
				if err == nil {
					text, _ := completeUTF8(data)
					v.LiveText = strings.ToValidUTF8(string(text), "\uFFFD")
					v.LiveOffset = v.LiveFrom + uint64(len(text))
				}
			}
		}
	}
	arts := v.Run.GetArtifacts()
	if slices.Contains(arts, "failure-context.md") {
		data, size, err := s.readArtifact(ctx, id, "failure-context.md", 0, contextShown)
		if err == nil {
			v.Failure, v.FailureCut = strings.ToValidUTF8(string(data), "\uFFFD"), size > uint64(len(data))
		}
	}
	if slices.Contains(arts, "changes.diff") {
		v.HasDiff = true
		if files, _, err := s.diffSummary(ctx, id, "changes.diff"); err == nil {
			for _, f := range files {
				v.FilesAdd += f.Add
				v.FilesDel += f.Del
			}
			if len(files) > filesShown {
				v.FilesMore = len(files) - filesShown
				files = files[:filesShown]
			}
			v.Files = files
		}
	}
	s.loadHistory(ctx, v)
	return v, nil
}

// readBody reads at most limit bytes of a message body.
func (s *Server) readBody(ctx context.Context, id string, limit int) ([]byte, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	st, err := s.c.GetMessageBody(ctx, &decreev1.GetMessageBodyRequest{Id: id})
	if err != nil {
		return nil, err
	}
	var out []byte
	for len(out) < limit {
		resp, err := st.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return out, err
		}
		out = append(out, resp.GetData()...)
	}
	return out, nil
}

// loadHistory reads the chain's events: the message's own, and the
// follow-ups it queued (the "follow-up" MESSAGE_QUEUED events after one of
// its attempts started and before another message started: only a
// successful attempt's follow-ups are queued) or that were rejected.
func (s *Server) loadHistory(ctx context.Context, v *messageView) {
	id, chain := v.Msg.GetId(), v.Msg.GetChain()
	if chain == "" {
		return
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	st, err := s.c.WatchEvents(ctx, &decreev1.WatchEventsRequest{Chain: chain})
	if err != nil {
		return
	}
	collecting := false
	for {
		resp, err := st.Recv()
		if err != nil {
			return
		}
		ev := resp.GetEvent()
		if ev.GetMessageId() == id {
			if len(v.Events) < eventsShown {
				v.Events = append(v.Events, ev)
			} else {
				v.EventsTrunc = true
			}
		}
		switch {
		case ev.GetMessageId() == id && ev.GetKind() == decreev1.EventKind_EVENT_KIND_ATTEMPT_STARTED:
			collecting = true
		case ev.GetMessageId() != id && ev.GetKind() == decreev1.EventKind_EVENT_KIND_MESSAGE_STARTED:
			collecting = false
		case collecting && ev.GetKind() == decreev1.EventKind_EVENT_KIND_MESSAGE_QUEUED && strings.HasPrefix(ev.GetText(), "follow-up "):
			v.FollowUps = append(v.FollowUps, followUp{ID: ev.GetMessageId(), Text: ev.GetText()})
		case ev.GetKind() == decreev1.EventKind_EVENT_KIND_MESSAGE_DEAD && strings.Contains(ev.GetText(), " of "+id+" rejected"):
			v.FollowUps = append(v.FollowUps, followUp{ID: ev.GetMessageId(), Text: ev.GetText(), Dead: true})
		}
	}
}
