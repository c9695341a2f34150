package dashboard

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"time"

	decreev1 "github.com/decreehq/decree/proto/decree/v1"
)

// actionTimeout bounds an action (CancelMessage returns once the routine
// no longer runs and the tree is reverted; a revert rewrites files).
const actionTimeout = time.Minute

// confirmView asks before an action; resultView tells how it went.
type confirmView struct {
	Action   string // cancel, requeue, revert, submit
	Question string
	ID       string
	Fields   []kv // hidden fields carried to the confirmed POST
	Post     string
}

func (v confirmView) title() string { return "Confirm: " + v.Action }

type kv struct{ Key, Value string }

type resultView struct {
	OK      bool
	Heading string
	Detail  []string
	Link    string
	LinkTxt string
}

func (v resultView) title() string { return v.Heading }

// messageAction runs cancel, requeue or revert: without confirm=yes it
// asks first (a page that works without JavaScript), then it calls the
// controller and shows the result.
func (s *Server) messageAction(w http.ResponseWriter, r *http.Request) {
	id, action := r.PathValue("id"), r.PathValue("action")
	questions := map[string]string{
		"cancel":  "Cancel %s? A running attempt is stopped, the tree reverted to where the message started, and the message dead-lettered.",
		"requeue": "Requeue %s? The dead letter goes back into the inbox and runs again from its first attempt.",
		"revert":  "Revert %s? Its changes are undone in the working tree (refused if those files changed since).",
	}
	q, ok := questions[action]
	if !ok {
		s.fail(w, r, http.StatusNotFound, "No such action: use cancel, requeue or revert.")
		return
	}
	reason := strings.TrimSpace(r.PostFormValue("reason"))
	if r.PostFormValue("confirm") != "yes" {
		v := confirmView{Action: action, Question: fmt.Sprintf(q, id), ID: id, Post: "/messages/" + id + "/" + action}
		s.render(w, r, http.StatusOK, "confirm", v)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), actionTimeout)
	defer cancel()
	res, err := s.act(ctx, action, id, reason)
	if err != nil {
		s.failRPC(w, r, action+" "+id, err)
		return
	}
	s.log.Info("dashboard action", "action", action, "message", id)
	s.render(w, r, http.StatusOK, "result", res)
}

// act calls the controller for one action and describes the result.
func (s *Server) act(ctx context.Context, action, id, reason string) (resultView, error) {
	res := resultView{OK: true, Link: "/messages/" + id, LinkTxt: "Back to " + id}
	switch action {
	case "cancel":
		if reason == "" {
			reason = "cancelled from the dashboard"
		}
		resp, err := s.c.CancelMessage(ctx, &decreev1.CancelMessageRequest{Id: id, Reason: reason})
		if err != nil {
			return res, err
		}
		res.Heading = "Cancelled " + id
		res.Detail = []string{"The message is now " + stateName(resp.GetMessage().GetState()) + ": " + resp.GetMessage().GetDeadReason()}
	case "requeue":
		resp, err := s.c.RequeueMessage(ctx, &decreev1.RequeueMessageRequest{Id: id})
		if err != nil {
			return res, err
		}
		res.Heading = "Requeued " + id
		res.Detail = []string{"The message is back in the inbox (" + stateName(resp.GetMessage().GetState()) + ")."}
		if nid := resp.GetMessage().GetId(); nid != "" && nid != id {
			res.Link, res.LinkTxt = "/messages/"+nid, "Open "+nid
		}
	case "revert":
		resp, err := s.c.RevertMessage(ctx, &decreev1.RevertMessageRequest{Id: id})
		if err != nil {
			return res, err
		}
		res.Heading = "Reverted " + id
		res.Detail = append([]string{fmt.Sprintf("%d paths restored:", len(resp.GetPaths()))}, resp.GetPaths()...)
	}
	return res, nil
}

type submitView struct {
	Routines []*decreev1.RoutineInfo
	Default  string
	Routine  *decreev1.RoutineInfo
	Name     string
	Body     string
	Values   map[string]string
	Error    string
}

func (submitView) title() string { return "Submit a message" }

// customParams are a routine's own parameters (the standard ones are set
// by decree).
func customParams(r *decreev1.RoutineInfo) []*decreev1.Parameter {
	var out []*decreev1.Parameter
	for _, p := range r.GetParameters() {
		if !p.GetStandard() {
			out = append(out, p)
		}
	}
	return out
}

func (s *Server) loadSubmit(ctx context.Context, r *http.Request) (*submitView, error) {
	resp, err := s.c.ListRoutines(ctx, &decreev1.ListRoutinesRequest{})
	if err != nil {
		return nil, err
	}
	v := &submitView{Routines: resp.GetRoutines(), Default: resp.GetDefaultRoutine(), Values: map[string]string{},
		Name: r.FormValue("name"), Body: r.FormValue("body")}
	want := r.FormValue("routine")
	if want == "" {
		want = v.Default
	}
	for _, rt := range v.Routines {
		if rt.GetName() == want {
			v.Routine = rt
		}
	}
	if v.Routine == nil && len(v.Routines) > 0 {
		v.Routine = v.Routines[0]
	}
	for _, p := range customParams(v.Routine) {
		if val, ok := r.Form["param."+p.GetName()]; ok && len(val) > 0 {
			v.Values[p.GetName()] = val[0]
		} else {
			v.Values[p.GetName()] = p.GetDefaultValue()
		}
	}
	return v, nil
}

// submitForm shows the form: a routine picker and the chosen routine's
// parameters (?routine= picks another; htmx swaps only the parameters).
func (s *Server) submitForm(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := callCtx(r)
	defer cancel()
	v, err := s.loadSubmit(ctx, r)
	if err != nil {
		s.failRPC(w, r, "list routines", err)
		return
	}
	if r.Header.Get("HX-Request") != "" && r.URL.Query().Get("part") == "params" {
		s.renderPart(w, r, http.StatusOK, "submit", "params", v)
		return
	}
	s.render(w, r, http.StatusOK, "submit", v)
}

// submit asks for confirmation, then queues the message with
// SubmitMessage (a request id made for the confirmation page makes a
// repeated post queue nothing twice).
func (s *Server) submit(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := callCtx(r)
	defer cancel()
	v, err := s.loadSubmit(ctx, r)
	if err != nil {
		s.failRPC(w, r, "list routines", err)
		return
	}
	if v.Routine == nil {
		s.fail(w, r, http.StatusConflict, "No routine is enabled: add one under .decree/routines/ and run routine-sync.")
		return
	}
	fields := []*decreev1.Field{{Key: "routine", Value: v.Routine.GetName()}}
	var keys []string
	for k := range v.Values {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if val := v.Values[k]; val != "" {
			fields = append(fields, &decreev1.Field{Key: k, Value: val})
		}
	}
	if r.PostFormValue("show") == "params" {
		// Without JavaScript, choosing another routine posts the form
		// back to show that routine's parameters.
		s.render(w, r, http.StatusOK, "submit", v)
		return
	}
	if r.PostFormValue("confirm") != "yes" {
		c := confirmView{Action: "submit", Post: "/submit",
			Question: fmt.Sprintf("Queue a message for routine %s?", v.Routine.GetName())}
		c.Fields = append(c.Fields, kv{"routine", v.Routine.GetName()}, kv{"name", v.Name}, kv{"body", v.Body}, kv{"request_id", "dashboard-" + randomHex(16)})
		for _, k := range keys {
			c.Fields = append(c.Fields, kv{"param." + k, v.Values[k]})
		}
		s.render(w, r, http.StatusOK, "confirm", c)
		return
	}
	resp, err := s.c.SubmitMessage(ctx, &decreev1.SubmitMessageRequest{Name: v.Name, Body: []byte(v.Body), Fields: fields, RequestId: r.PostFormValue("request_id")})
	if err != nil {
		s.failRPC(w, r, "submit", err)
		return
	}
	id := resp.GetMessage().GetId()
	res := resultView{OK: true, Heading: "Queued " + id, Link: "/messages/" + id, LinkTxt: "Open " + id,
		Detail: []string{fmt.Sprintf("Routine %s, chain %s.", resp.GetMessage().GetRoutine(), resp.GetMessage().GetChain())}}
	if resp.GetReplayed() {
		res.Detail = append(res.Detail, "This form was sent before; nothing new was queued.")
	}
	s.log.Info("dashboard action", "action", "submit", "message", id)
	s.render(w, r, http.StatusOK, "result", res)
}
