package dashboard

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"sync"
	"time"

	decreev1 "github.com/decreehq/decree/proto/decree/v1"
)

// queueShown is how many queued messages the overview lists; the
// messages page pages through the rest.
const queueShown = 200

type chainGroup struct {
	Chain    string
	Messages []*decreev1.MessageInfo
}

type overviewView struct {
	Status   *decreev1.GetStatusResponse
	Chains   []chainGroup
	MoreQ    bool
	Workers  []*decreev1.WorkerInfo
	Cron     []*decreev1.CronEntry
	Dead     *decreev1.GetDeadLetterStatsResponse
	Run      *decreev1.RunInfo
	Now      time.Time
	Problems []string // calls that failed, shown instead of their part
}

func (overviewView) title() string { return "Overview" }

func (s *Server) loadOverview(ctx context.Context) *overviewView {
	v := &overviewView{Now: time.Now()}
	var g sync.WaitGroup
	var (
		stErr, qErr, wErr, cErr, dErr error
		queue                         *decreev1.ListMessagesResponse
	)
	g.Go(func() { v.Status, stErr = s.c.GetStatus(ctx, &decreev1.GetStatusRequest{}) })
	g.Go(func() {
		queue, qErr = s.c.ListMessages(ctx, &decreev1.ListMessagesRequest{PageSize: queueShown, States: []decreev1.MessageState{
			decreev1.MessageState_MESSAGE_STATE_RUNNING, decreev1.MessageState_MESSAGE_STATE_QUEUED, decreev1.MessageState_MESSAGE_STATE_INTERRUPTED}})
	})
	g.Go(func() {
		r, err := s.c.ListWorkers(ctx, &decreev1.ListWorkersRequest{})
		v.Workers, wErr = r.GetWorkers(), err
	})
	g.Go(func() {
		r, err := s.c.ListCronEntries(ctx, &decreev1.ListCronEntriesRequest{})
		v.Cron, cErr = r.GetEntries(), err
	})
	g.Go(func() { v.Dead, dErr = s.c.GetDeadLetterStats(ctx, &decreev1.GetDeadLetterStatsRequest{}) })
	g.Wait()
	for _, e := range []struct {
		what string
		err  error
	}{{"status", stErr}, {"queue", qErr}, {"workers", wErr}, {"cron", cErr}, {"dead letters", dErr}} {
		if e.err != nil {
			v.Problems = append(v.Problems, fmt.Sprintf("%s: %v", e.what, e.err))
		}
	}
	if run := v.Status.GetRunning(); run != nil {
		if r, err := s.c.GetRun(ctx, &decreev1.GetRunRequest{Id: run.GetId()}); err == nil {
			v.Run = r.GetRun()
		}
	}
	v.Chains, v.MoreQ = groupChains(queue.GetMessages()), queue.GetNextPageToken() != ""
	sort.Slice(v.Workers, func(i, j int) bool { return v.Workers[i].GetId() < v.Workers[j].GetId() })
	return v
}

// groupChains groups messages by chain, keeping the API's order (oldest
// chain first, by seq within one).
func groupChains(msgs []*decreev1.MessageInfo) []chainGroup {
	var out []chainGroup
	idx := map[string]int{}
	for _, m := range msgs {
		i, ok := idx[m.GetChain()]
		if !ok {
			i = len(out)
			idx[m.GetChain()] = i
			out = append(out, chainGroup{Chain: m.GetChain()})
		}
		out[i].Messages = append(out[i].Messages, m)
	}
	return out
}

func (s *Server) overview(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := callCtx(r)
	defer cancel()
	s.render(w, r, http.StatusOK, "overview", s.loadOverview(ctx))
}

// overviewLive is the overview's live part alone, fetched by htmx when the
// event stream reports a change.
func (s *Server) overviewLive(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := callCtx(r)
	defer cancel()
	s.renderPart(w, r, http.StatusOK, "overview", "live", s.loadOverview(ctx))
}

// eventsStream tells the browser, as server-sent events, that something
// changed: one "change" event per burst of controller events (at most
// every 300 ms), carrying the kind of the last one.
func (s *Server) eventsStream(w http.ResponseWriter, r *http.Request) {
	sse, ok := startSSE(w)
	if !ok {
		s.fail(w, r, http.StatusInternalServerError, "streaming is not supported here")
		return
	}
	ctx := r.Context()
	changes, unsubscribe := s.hub.subscribe()
	defer unsubscribe()
	keep := time.NewTicker(20 * time.Second)
	defer keep.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-keep.C:
			if sse.comment("keep-alive") != nil {
				return
			}
		case kind := <-changes:
			if sse.event("change", "", kind) != nil {
				return
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(300 * time.Millisecond):
			}
		}
	}
}
