package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/decreehq/decree/internal/testtool"
	decreev1 "github.com/decreehq/decree/proto/decree/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TestAPIReplyAndWaits: over the API (TCP, tokens), WatchMessage carries
// WAITING, REPLIED and the outcome; ListWaits, ListMessages (state
// WAITING) and GetStatus show the wait; Reply refuses an unknown option
// (INVALID_ARGUMENT), a message not waiting (FAILED_PRECONDITION) and a
// second answer (ALREADY_EXISTS), and acknowledges a retried request id.
func TestAPIReplyAndWaits(t *testing.T) {
	project := apiProject(t)
	src := fmt.Sprintf(routineHeader, "API test routine asker") + askRoutine + "\n"
	if err := os.WriteFile(filepath.Join(project, ".decree", "routines", "asker.sh"), []byte(src), 0o755); err != nil {
		t.Fatal(err)
	}
	c := testtool.StartCluster(t, project)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	e := &apiEnv{c: c, client: decreev1.NewControllerServiceClient(c.Dial()), ctx: ctx}
	id := e.submit(t, "asks", "asker", "ask me").GetMessage().GetId()
	var waits *decreev1.ListWaitsResponse
	testtool.WaitFor(t, 30*time.Second, "the message to wait", func() bool {
		var err error
		waits, err = e.client.ListWaits(ctx, &decreev1.ListWaitsRequest{})
		return err == nil && len(waits.GetWaits()) == 1
	})
	wt := waits.GetWaits()[0]
	if wt.GetId() != id+"-w1" || wt.GetKind() != "ask" || wt.GetOptions()[1].GetMeaning() != "use spaces" || wt.GetReplyCommand() != "decreectl reply "+id+"-w1 OPTION [-m NOTE]" {
		t.Fatalf("ListWaits = %v", waits)
	}
	st, err := e.client.GetStatus(ctx, &decreev1.GetStatusRequest{})
	if err != nil || st.GetWaits() != 1 {
		t.Fatalf("GetStatus waits = %d, %v", st.GetWaits(), err)
	}
	list, err := e.client.ListMessages(ctx, &decreev1.ListMessagesRequest{States: []decreev1.MessageState{decreev1.MessageState_MESSAGE_STATE_WAITING}})
	if err != nil || len(list.GetMessages()) != 1 || list.GetMessages()[0].GetId() != id {
		t.Fatalf("ListMessages(WAITING) = %v, %v", list, err)
	}
	refuse := func(req *decreev1.ReplyRequest, want codes.Code) {
		t.Helper()
		if _, err := e.client.Reply(ctx, req); status.Code(err) != want {
			t.Errorf("Reply %v: %v, want %s", req, err, want)
		}
	}
	refuse(&decreev1.ReplyRequest{To: wt.GetId(), Option: "maybe"}, codes.InvalidArgument)
	refuse(&decreev1.ReplyRequest{To: "2000010100000000-0", Option: "yes"}, codes.FailedPrecondition)
	resp, err := e.client.Reply(ctx, &decreev1.ReplyRequest{To: wt.GetId(), Option: "no", Note: []byte("over the API"), RequestId: "api-1"})
	if err != nil || resp.GetOption() != "no" || resp.GetWait().GetMessageId() != id {
		t.Fatalf("Reply: %v, %v", resp, err)
	}
	if _, err := e.client.Reply(ctx, &decreev1.ReplyRequest{To: wt.GetId(), Option: "no", Note: []byte("over the API"), RequestId: "api-1"}); err != nil {
		t.Errorf("the same request again: %v", err)
	}
	refuse(&decreev1.ReplyRequest{To: wt.GetId(), Option: "yes", RequestId: "api-2"}, codes.AlreadyExists)
	w := e.watch(t, id, "", 0)
	var kinds []decreev1.EventKind
	for _, it := range w.items {
		if ev := it.GetEvent(); ev != nil {
			kinds = append(kinds, ev.GetKind())
			if ev.GetKind() == decreev1.EventKind_EVENT_KIND_WAITING && (ev.GetWaitId() != wt.GetId() || ev.GetText() != "Indent with tabs?") {
				t.Errorf("WAITING event %v", ev)
			}
		}
	}
	if w.outcome.GetState() != decreev1.MessageState_MESSAGE_STATE_DONE {
		t.Errorf("outcome %v; events %v", w.outcome, kinds)
	}
	want := map[decreev1.EventKind]int{decreev1.EventKind_EVENT_KIND_WAITING: 1, decreev1.EventKind_EVENT_KIND_REPLIED: 1}
	for _, k := range kinds {
		if _, counted := want[k]; counted {
			want[k]--
		}
	}
	for k, n := range want {
		if n != 0 {
			t.Errorf("event %s seen %d times too few; events %v", k, n, kinds)
		}
	}
	if got := mustRead(t, filepath.Join(project, "answer-"+id+".txt")); got != "answer=no note=over the API\n" {
		t.Errorf("answer = %q", got)
	}
}
