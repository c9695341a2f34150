package dashboard

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	decreev1 "github.com/decreehq/decree/proto/decree/v1"
)

// TestOverviewShowsLanes: the overview's live part lists parallel lanes
// (a running one with its message, one in the merge queue) and the latest
// merge conflicts, and shows no lanes section when there are none.
func TestOverviewShowsLanes(t *testing.T) {
	p, err := loadPages()
	if err != nil {
		t.Fatal(err)
	}
	render := func(st *decreev1.GetStatusResponse) string {
		var buf bytes.Buffer
		v := view{Data: &overviewView{Status: st, Now: time.Now()}}
		if err := p.sets["overview"].ExecuteTemplate(&buf, "live", v); err != nil {
			t.Fatal(err)
		}
		return buf.String()
	}
	opened := timestamppb.New(time.Now().Add(-time.Minute))
	got := render(&decreev1.GetStatusResponse{
		Lanes: []*decreev1.Lane{
			{Chain: "c1", WorkerId: "w1", MessageId: "c1-1", Attempt: 2, State: decreev1.LaneState_LANE_STATE_RUNNING, Opened: opened},
			{Chain: "c2", WorkerId: "w2", State: decreev1.LaneState_LANE_STATE_MERGING, MergePosition: 1, RetryOf: "c0", Opened: opened},
		},
		MergeConflicts: []*decreev1.MergeConflict{{Chain: "c0", Conflicts: []string{"a.txt: both changed line 2"}, RequeuedAs: "c2"}},
	})
	for _, want := range []string{"Parallel lanes", `href="/messages/c1-1"`, "attempt 2", "w1", "merge queue #1", "runs c0 again after a merge conflict",
		"Merge conflicts: chain c0 (a.txt: both changed line 2), requeued as c2"} {
		if !strings.Contains(got, want) {
			t.Errorf("overview lacks %q:\n%s", want, got)
		}
	}
	if got := render(&decreev1.GetStatusResponse{}); strings.Contains(got, "Parallel lanes") || strings.Contains(got, "Merge conflicts") {
		t.Errorf("overview without lanes shows a lanes section:\n%s", got)
	}
}
