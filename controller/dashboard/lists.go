package dashboard

import (
	"context"
	"html/template"
	"net/http"
	"strings"
	"time"

	decreev1 "github.com/decreehq/decree/proto/decree/v1"
)

// listPage is how many messages a list page shows.
const listPage = 100

type listView struct {
	Heading  string
	State    string
	Messages []*decreev1.MessageInfo
	Next     template.URL
	Stats    *decreev1.GetDeadLetterStatsResponse
	Dead     bool
}

func (v listView) title() string { return v.Heading }

var stateByName = map[string]decreev1.MessageState{
	"queued":      decreev1.MessageState_MESSAGE_STATE_QUEUED,
	"running":     decreev1.MessageState_MESSAGE_STATE_RUNNING,
	"done":        decreev1.MessageState_MESSAGE_STATE_DONE,
	"dead":        decreev1.MessageState_MESSAGE_STATE_DEAD,
	"interrupted": decreev1.MessageState_MESSAGE_STATE_INTERRUPTED,
}

// messageList lists messages, optionally of one state or chain, a page at
// a time.
func (s *Server) messageList(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	req := &decreev1.ListMessagesRequest{PageSize: listPage, PageToken: q.Get("page"), Chain: q.Get("chain")}
	v := listView{Heading: "Messages", State: q.Get("state")}
	if v.State != "" {
		st, ok := stateByName[v.State]
		if !ok {
			s.fail(w, r, http.StatusBadRequest, "state: want queued, running, done, dead or interrupted")
			return
		}
		req.States = []decreev1.MessageState{st}
		v.Heading = "Messages: " + v.State
	}
	if req.Chain != "" {
		v.Heading += " of chain " + req.Chain
	}
	s.list(w, r, req, v)
}

// deadLetters lists inbox/dead/ with each note's reason.
func (s *Server) deadLetters(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := callCtx(r)
	defer cancel()
	v := listView{Heading: "Dead letters", State: "dead", Dead: true}
	v.Stats, _ = s.c.GetDeadLetterStats(ctx, &decreev1.GetDeadLetterStatsRequest{})
	s.list(w, r, &decreev1.ListMessagesRequest{PageSize: listPage, PageToken: r.URL.Query().Get("page"),
		States: []decreev1.MessageState{decreev1.MessageState_MESSAGE_STATE_DEAD}}, v)
}

func (s *Server) list(w http.ResponseWriter, r *http.Request, req *decreev1.ListMessagesRequest, v listView) {
	ctx, cancel := callCtx(r)
	defer cancel()
	resp, err := s.c.ListMessages(ctx, req)
	if err != nil {
		s.failRPC(w, r, "list messages", err)
		return
	}
	v.Messages = resp.GetMessages()
	if t := resp.GetNextPageToken(); t != "" {
		q := r.URL.Query()
		q.Set("page", t)
		v.Next = template.URL(r.URL.Path + "?" + q.Encode())
	}
	s.render(w, r, http.StatusOK, "list", v)
}

type cronView struct {
	Entries []*decreev1.CronEntry
	Daemon  bool
}

func (cronView) title() string { return "Cron" }

func (s *Server) cronPage(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := callCtx(r)
	defer cancel()
	resp, err := s.c.ListCronEntries(ctx, &decreev1.ListCronEntriesRequest{})
	if err != nil {
		s.failRPC(w, r, "list cron entries", err)
		return
	}
	st, _ := s.c.GetStatus(ctx, &decreev1.GetStatusRequest{})
	s.render(w, r, http.StatusOK, "cron", cronView{Entries: resp.GetEntries(), Daemon: st.GetDaemon()})
}

// checkResult is the last pre-check run, kept to show on the routines
// page (pre-checks run routines on workers, so a page view never starts
// them: the button does).
type checkResult struct {
	At      time.Time
	Results map[string]*decreev1.PreCheckResult
	Err     string
}

type routinesView struct {
	Routines []*decreev1.RoutineInfo
	Default  string
	Checks   *checkResult
}

func (routinesView) title() string { return "Routines" }

func (v routinesView) Check(name string) *decreev1.PreCheckResult {
	if v.Checks == nil {
		return nil
	}
	return v.Checks.Results[name]
}

func (s *Server) routinesPage(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := callCtx(r)
	defer cancel()
	resp, err := s.c.ListRoutines(ctx, &decreev1.ListRoutinesRequest{All: true})
	if err != nil {
		s.failRPC(w, r, "list routines", err)
		return
	}
	s.mu.Lock()
	checks := s.checks
	s.mu.Unlock()
	s.render(w, r, http.StatusOK, "routines", routinesView{Routines: resp.GetRoutines(), Default: resp.GetDefaultRoutine(), Checks: checks})
}

// runChecks runs every enabled routine's pre-check on the workers and
// shows the routines page with the results.
func (s *Server) runChecks(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Minute)
	defer cancel()
	res := &checkResult{At: time.Now(), Results: map[string]*decreev1.PreCheckResult{}}
	resp, err := s.c.CheckRoutines(ctx, &decreev1.CheckRoutinesRequest{AllEnabled: true})
	if err != nil {
		res.Err = err.Error()
	}
	for _, c := range resp.GetResults() {
		res.Results[c.GetRoutine()] = c
	}
	s.mu.Lock()
	s.checks = res
	s.mu.Unlock()
	http.Redirect(w, r, "/routines", http.StatusSeeOther)
}

func formatName(f decreev1.RoutineFormat) string {
	return strings.ToLower(strings.TrimPrefix(f.String(), "ROUTINE_FORMAT_"))
}
