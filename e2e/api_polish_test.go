package e2e

// API frictions an integrator meets (issue 23): one body limit for both
// submit calls, cursors bound to their message, request_id rules, replays,
// outcomes, error texts, and what GetArtifact serves.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/decreehq/decree/internal/testtool"
	"github.com/decreehq/decree/pkg/auth"
	decreev1 "github.com/decreehq/decree/proto/decree/v1"
)

// newAPIEnvWith is newAPIEnv on a project that prepare changes first.
func newAPIEnvWith(t *testing.T, prepare func(project string)) *apiEnv {
	t.Helper()
	project := apiProject(t)
	prepare(project)
	c := testtool.StartCluster(t, project)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return &apiEnv{c: c, client: decreev1.NewControllerServiceClient(c.Dial()), ctx: ctx}
}

// TestAPIUnaryBodyLimit: SubmitMessage refuses a body over 63 MiB as
// SubmitMessageStream does (RESOURCE_EXHAUSTED), and queues nothing.
func TestAPIUnaryBodyLimit(t *testing.T) {
	e := newAPIEnv(t)
	for _, size := range []int{auth.MaxBodyBytes + 1, 64<<20 - 200} {
		_, err := e.client.SubmitMessage(e.ctx, &decreev1.SubmitMessageRequest{Name: "big", Body: make([]byte, size),
			Fields: []*decreev1.Field{{Key: "routine", Value: "echo"}}})
		if status.Code(err) != codes.ResourceExhausted || !strings.Contains(status.Convert(err).Message(), "63 MiB") {
			t.Errorf("SubmitMessage with a %d-byte body: %v, want RESOURCE_EXHAUSTED naming 63 MiB", size, err)
		}
	}
	list, err := e.client.ListMessages(e.ctx, &decreev1.ListMessagesRequest{})
	if err != nil || len(list.GetMessages()) != 0 {
		t.Errorf("after refused submits: %v %v", list.GetMessages(), err)
	}
}

// TestAPIWatchCursorOfAnotherMessage: a cursor is bound to its message.
func TestAPIWatchCursorOfAnotherMessage(t *testing.T) {
	e := newAPIEnv(t)
	a := e.submit(t, "a", "echo", "x").GetMessage().GetId()
	b := e.submit(t, "b", "echo", "y").GetMessage().GetId()
	wa := e.watch(t, a, "", 0)
	e.watch(t, b, "", 0)
	for i, it := range wa.items {
		st, err := e.client.WatchMessage(e.ctx, &decreev1.WatchMessageRequest{MessageId: b, Cursor: it.GetCursor()})
		err = recvErr(st, err)
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(status.Convert(err).Message(), a) {
			t.Errorf("cursor %d of %s given for %s: %v, want INVALID_ARGUMENT naming %s", i, a, b, err, a)
		}
	}
	// Its own cursors still resume.
	if rest := e.watch(t, a, wa.items[0].GetCursor(), 0); summary(rest.items) != summary(wa.items[1:]) {
		t.Errorf("resume from the first cursor: %s, want %s", summary(rest.items), summary(wa.items[1:]))
	}
}

// TestAPIRequestIDAndReplay: request_id takes printable ASCII with spaces
// and refuses control and non-ASCII characters; a replay returns the first
// result (the message as queued, the same event_sequence), not the message
// as it is now.
func TestAPIRequestIDAndReplay(t *testing.T) {
	e := newAPIEnv(t)
	for _, bad := range []string{"tab\there", "line\nfeed", "naïve", strings.Repeat("k", 129)} {
		_, err := e.client.SubmitMessage(e.ctx, &decreev1.SubmitMessageRequest{Name: "x", RequestId: bad})
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(status.Convert(err).Message(), "request_id") {
			t.Errorf("request_id %q: %v, want INVALID_ARGUMENT", bad, err)
		}
	}
	req := &decreev1.SubmitMessageRequest{Name: "spaced", Body: []byte("b"), RequestId: "order 42 ~ retry-safe!",
		Fields: []*decreev1.Field{{Key: "routine", Value: "echo"}}}
	first, err := e.client.SubmitMessage(e.ctx, req)
	if err != nil {
		t.Fatalf("request_id with spaces: %v", err)
	}
	if w := e.watch(t, first.GetMessage().GetId(), "", 0); w.outcome.GetState() != decreev1.MessageState_MESSAGE_STATE_DONE {
		t.Fatalf("outcome %v", w.outcome)
	}
	again, err := e.client.SubmitMessage(e.ctx, req)
	if err != nil || !again.GetReplayed() {
		t.Fatalf("replay: %v %v", again, err)
	}
	if !proto.Equal(again.GetMessage(), first.GetMessage()) || again.GetEventSequence() != first.GetEventSequence() {
		t.Errorf("replay returned\n %v\nwant the first result\n %v", again, first)
	}
	if again.GetMessage().GetState() != decreev1.MessageState_MESSAGE_STATE_QUEUED {
		t.Errorf("replayed message state %v, want QUEUED (as queued)", again.GetMessage().GetState())
	}
	// The streaming call replays the same result.
	hdr := proto.Clone(req).(*decreev1.SubmitMessageRequest)
	hdr.Body = nil
	st, err := e.streamSubmit(t, header(hdr), req.GetBody(), 1)
	if err != nil || !st.GetReplayed() || !proto.Equal(st.GetMessage(), first.GetMessage()) {
		t.Errorf("streamed replay: %v %v", st, err)
	}
}

// TestAPIListStatesError: the error for an unknown state names every
// state the filter accepts, INTERRUPTED included.
func TestAPIListStatesError(t *testing.T) {
	e := newAPIEnv(t)
	_, err := e.client.ListMessages(e.ctx, &decreev1.ListMessagesRequest{States: []decreev1.MessageState{99}})
	if status.Code(err) != codes.InvalidArgument {
		t.Fatalf("state 99: %v", err)
	}
	for n, name := range decreev1.MessageState_name {
		has := strings.Contains(status.Convert(err).Message(), name)
		if want := n != 0; has != want {
			t.Errorf("error %q names %s: %v, want %v", status.Convert(err).Message(), name, has, want)
		}
	}
	if _, err := e.client.ListMessages(e.ctx, &decreev1.ListMessagesRequest{States: []decreev1.MessageState{decreev1.MessageState_MESSAGE_STATE_INTERRUPTED}}); err != nil {
		t.Errorf("INTERRUPTED filter: %v", err)
	}
}

// TestAPIWatchLogsMissingAttempt: an attempt that was not made is
// NOT_FOUND with a message for people, not an OS error with a path.
func TestAPIWatchLogsMissingAttempt(t *testing.T) {
	e := newAPIEnv(t)
	id := e.submit(t, "once", "echo", "x").GetMessage().GetId()
	e.watch(t, id, "", 0)
	cases := []struct {
		name string
		req  *decreev1.WatchLogsRequest
	}{
		{"attempt 7", &decreev1.WatchLogsRequest{MessageId: id, Attempt: 7}},
		{"attempt 2 followed after the end", &decreev1.WatchLogsRequest{MessageId: id, Attempt: 2, Follow: true}},
		{"attempt 3 with an offset", &decreev1.WatchLogsRequest{MessageId: id, Attempt: 3, Offset: 5}},
		{"unknown message", &decreev1.WatchLogsRequest{MessageId: "2020010100000000-0", Attempt: 1}},
		{"stream never written", &decreev1.WatchLogsRequest{MessageId: id, Attempt: 1, Stream: "router"}},
	}
	for _, tc := range cases {
		ctx, cancel := context.WithTimeout(e.ctx, 10*time.Second)
		st, err := e.client.WatchLogs(ctx, tc.req)
		err = recvErr(st, err)
		cancel()
		msg := status.Convert(err).Message()
		if status.Code(err) != codes.NotFound || strings.Contains(msg, "open ") || strings.Contains(msg, "no such file") || strings.Contains(msg, ".decree/") {
			t.Errorf("%s: %v, want NOT_FOUND without an OS error", tc.name, err)
		}
	}
	st, err := e.client.WatchLogs(e.ctx, &decreev1.WatchLogsRequest{MessageId: id, Attempt: 1})
	if err := recvErr(st, err); err != nil && !errors.Is(err, io.EOF) {
		t.Errorf("the attempt that was made: %v", err)
	}
}

// TestAPIOutcomeField: MessageOutcome.outcome tells a cancel from a
// failure without reading the reason.
func TestAPIOutcomeField(t *testing.T) {
	e := newAPIEnv(t)
	running := e.submit(t, "running", "slow", "x").GetMessage().GetId()
	e.watch(t, running, "", 4) // its log has begun
	queued := e.submit(t, "queued", "echo", "x").GetMessage().GetId()
	if _, err := e.client.CancelMessage(e.ctx, &decreev1.CancelMessageRequest{Id: queued, Reason: "not needed"}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.client.CancelMessage(e.ctx, &decreev1.CancelMessageRequest{Id: running, Reason: "stop"}); err != nil {
		t.Fatal(err)
	}
	failing := e.submit(t, "failing", "fail", "x").GetMessage().GetId()
	done := e.submit(t, "fine", "echo", "x").GetMessage().GetId()
	for _, c := range []struct {
		id   string
		want decreev1.RunOutcome
	}{
		{running, decreev1.RunOutcome_RUN_OUTCOME_CANCELLED},
		{queued, decreev1.RunOutcome_RUN_OUTCOME_CANCELLED},
		{failing, decreev1.RunOutcome_RUN_OUTCOME_DEAD_LETTERED},
		{done, decreev1.RunOutcome_RUN_OUTCOME_SUCCEEDED},
	} {
		if got := e.watch(t, c.id, "", 0).outcome.GetOutcome(); got != c.want {
			t.Errorf("%s: outcome %v, want %v", c.id, got, c.want)
		}
	}
}

// TestAPIGetArtifactServesRegularFilesOnly: a routine links a file outside
// the project into its run directory and makes a FIFO there; GetArtifact
// serves neither (NOT_FOUND, at once), the controller keeps answering, and
// regular artifacts still stream.
func TestAPIGetArtifactServesRegularFilesOnly(t *testing.T) {
	secret := filepath.Join(t.TempDir(), "secret.txt")
	if err := os.WriteFile(secret, []byte("outside the project\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	e := newAPIEnvWith(t, func(project string) {
		cfg := strings.Replace(apiConfig, "  off:\n", "  plant:\n    enabled: true\n  off:\n", 1)
		src := fmt.Sprintf(routineHeader, "plants a link and a FIFO") +
			fmt.Sprintf("ln -s %q \"$message_dir/leak.txt\"\nmkfifo \"$message_dir/pipe\"\necho planted > \"$message_dir/note.txt\"\n", secret)
		for f, b := range map[string]string{".decree/config.yml": cfg, ".decree/routines/plant.sh": src} {
			if err := os.WriteFile(filepath.Join(project, f), []byte(b), 0o755); err != nil {
				t.Fatal(err)
			}
		}
	})
	id := e.submit(t, "plant", "plant", "x").GetMessage().GetId()
	if w := e.watch(t, id, "", 0); w.outcome.GetState() != decreev1.MessageState_MESSAGE_STATE_DONE {
		t.Fatalf("outcome %v", w.outcome)
	}
	dir := filepath.Join(e.c.Project, ".decree", "runs", id)
	if fi, err := os.Lstat(filepath.Join(dir, "pipe")); err != nil || fi.Mode()&os.ModeNamedPipe == 0 {
		t.Fatalf("the routine left no FIFO: %v", err)
	}
	for i := 0; i < 3; i++ { // more than once: a blocked open would pin a thread each time
		for _, name := range []string{"leak.txt", "pipe"} {
			ctx, cancel := context.WithTimeout(e.ctx, 5*time.Second)
			st, err := e.client.GetArtifact(ctx, &decreev1.GetArtifactRequest{MessageId: id, Name: name})
			var data []byte
			if err == nil {
				for {
					r, rerr := st.Recv()
					if rerr != nil {
						err = rerr
						break
					}
					data = append(data, r.GetData()...)
				}
			}
			cancel()
			if status.Code(err) != codes.NotFound || strings.Contains(string(data), "outside") {
				t.Errorf("GetArtifact %s: %v (got %q), want NOT_FOUND at once", name, err, data)
			}
		}
	}
	if got := e.artifact(t, id, "note.txt"); got != "planted\n" {
		t.Errorf("note.txt = %q", got)
	}
	// The controller still stops on SIGTERM (no thread stuck in open).
	e.c.Controller.Signal(syscall.SIGTERM)
	select {
	case <-e.c.Controller.Done():
	case <-time.After(15 * time.Second):
		t.Errorf("the controller ignored SIGTERM after GetArtifact calls on a FIFO")
	}
}

// TestStatusShowsDefaultRoutine: a message naming no routine runs the
// default_routine, and status says which.
func TestStatusShowsDefaultRoutine(t *testing.T) {
	e := newAPIEnvWith(t, func(project string) {
		cfg := strings.Replace(apiConfig, "default_routine: echo", "default_routine: slow", 1)
		if err := os.WriteFile(filepath.Join(project, ".decree", "config.yml"), []byte(cfg), 0o644); err != nil {
			t.Fatal(err)
		}
	})
	resp, err := e.client.SubmitMessage(e.ctx, &decreev1.SubmitMessageRequest{Name: "plain", Body: []byte("no routine named")})
	if err != nil {
		t.Fatal(err)
	}
	id := resp.GetMessage().GetId()
	e.watch(t, id, "", 4)
	st, err := e.client.GetStatus(e.ctx, &decreev1.GetStatusRequest{})
	if err != nil || st.GetRunning().GetId() != id || st.GetRunning().GetRoutine() != "slow" {
		t.Errorf("GetStatus running %v (%v), want %s with routine slow", st.GetRunning(), err, id)
	}
	out, errOut, code := e.c.Ctl(e.ctx, "status")
	if code != 0 || !strings.Contains(out, "running     "+id+" (slow, attempt 1)") {
		t.Errorf("decreectl status (exit %d):\n%s%s", code, out, errOut)
	}
	list, err := e.client.ListMessages(e.ctx, &decreev1.ListMessagesRequest{})
	if err != nil || len(list.GetMessages()) != 1 || list.GetMessages()[0].GetRoutine() != "slow" {
		t.Errorf("ListMessages: %v %v", list.GetMessages(), err)
	}
	if _, err := e.client.CancelMessage(e.ctx, &decreev1.CancelMessageRequest{Id: id}); err != nil {
		t.Fatal(err)
	}
}
