package rpc

import (
	"context"
	"time"

	"github.com/decreehq/decree/controller/store"
)

// runPoll is how often a log follower waiting for a message's run to
// appear looks again.
const runPoll = 200 * time.Millisecond

// waitRun returns the run of message id, waiting while the message is
// still queued in the inbox and has no run yet (`decreectl logs -f ID`
// right after submitting). It returns OpenRun's error once the message is
// neither queued nor has a run, or ctx's error.
func waitRun(ctx context.Context, st *store.Store, id string) (*store.Run, error) {
	for {
		run, err := st.OpenRun(id)
		if err == nil || !queued(st, id) {
			return run, err
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(runPoll):
		}
	}
}

func queued(st *store.Store, id string) bool {
	entries, err := st.ListInbox()
	if err != nil {
		return false
	}
	for _, e := range entries {
		if e.ID == id {
			return true
		}
	}
	return false
}

// runInProgress reports whether the run of id is still being processed,
// so a log of it that does not exist yet is still to come.
func runInProgress(st *store.Store, id string) func() bool {
	return func() bool {
		run, err := st.OpenRun(id)
		return err == nil && run.State().Outcome == ""
	}
}
