package e2e

// The gRPC API as a client in any language sees it: a real controller and
// worker (separate processes) over TCP on loopback with tokens, called
// with the generated Go client.

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/decreehq/decree/internal/testtool"
	decreev1 "github.com/decreehq/decree/proto/decree/v1"
)

// apiConfig is the project configuration of the API tests.
const apiConfig = `commands:
  router: ""
max_retries: 2
max_depth: 10
default_routine: echo
routines:
  echo:
    enabled: true
  slow:
    enabled: true
  fail:
    enabled: true
  spawn:
    enabled: true
  off:
    enabled: false
`

// apiRoutines are stand-in routines: echo prints and writes a file, slow
// prints until cancelled (recording its pid), fail always fails, spawn
// leaves two follow-ups and one that cannot parse.
var apiRoutines = map[string]string{
	"echo": `echo "hello from $message_id"
echo "line two"
printf 'changed by %s\n' "$message_id" > "result-$message_id.txt"`,
	"slow": `echo $$ > "$message_dir/slow.pid"
for i in $(seq 1 6000); do echo "tick $i"; sleep 0.05; done`,
	"fail": `echo "failing on purpose"; exit 3`,
	"spawn": `[ "$seq" = 0 ] || { echo "follow-up $message_id"; exit 0; }
printf -- '---\nroutine: echo\n---\nfirst\n' > .decree/outbox/a.md
printf -- '---\nroutine: echo\n---\nsecond\n' > .decree/outbox/b.md
printf -- '---\nkey: [\n---\nbroken\n' > .decree/outbox/c.md`,
	"off": `echo never`,
}

// apiProject makes a project with apiConfig and apiRoutines.
func apiProject(t *testing.T) string {
	t.Helper()
	testtool.Require(t, "bash")
	project := testtool.InitProject(t)
	if err := os.WriteFile(filepath.Join(project, ".decree", "config.yml"), []byte(apiConfig), 0o644); err != nil {
		t.Fatal(err)
	}
	for name, body := range apiRoutines {
		src := fmt.Sprintf(routineHeader, "API test routine "+name) + body + "\n"
		if err := os.WriteFile(filepath.Join(project, ".decree", "routines", name+".sh"), []byte(src), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return project
}

type apiEnv struct {
	c      *testtool.Cluster
	client decreev1.ControllerServiceClient
	ctx    context.Context
}

func newAPIEnv(t *testing.T) *apiEnv {
	t.Helper()
	c := testtool.StartCluster(t, apiProject(t))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return &apiEnv{c: c, client: decreev1.NewControllerServiceClient(c.Dial()), ctx: ctx}
}

func (e *apiEnv) submit(t *testing.T, name, routineName, body string) *decreev1.SubmitMessageResponse {
	t.Helper()
	resp, err := e.client.SubmitMessage(e.ctx, &decreev1.SubmitMessageRequest{Name: name, Body: []byte(body),
		Fields: []*decreev1.Field{{Key: "routine", Value: routineName}}})
	if err != nil {
		t.Fatalf("SubmitMessage %s: %v", name, err)
	}
	return resp
}

// watched is what one WatchMessage stream delivered.
type watched struct {
	items   []*decreev1.WatchMessageResponse
	log     map[int32]string // attempt -> bytes
	outcome *decreev1.MessageOutcome
}

// watch follows a message from cursor to its end (or stop items).
func (e *apiEnv) watch(t *testing.T, id, cursor string, stop int) watched {
	t.Helper()
	st, err := e.client.WatchMessage(e.ctx, &decreev1.WatchMessageRequest{MessageId: id, Cursor: cursor})
	if err != nil {
		t.Fatal(err)
	}
	w := watched{log: map[int32]string{}}
	for stop <= 0 || len(w.items) < stop {
		r, err := st.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("WatchMessage %s: %v", id, err)
		}
		w.items = append(w.items, r)
		if l := r.GetLog(); l != nil {
			w.log[l.GetAttempt()] += string(l.GetData())
		}
		if o := r.GetOutcome(); o != nil {
			w.outcome = o
		}
	}
	return w
}

func (e *apiEnv) artifact(t *testing.T, id, name string) string {
	t.Helper()
	st, err := e.client.GetArtifact(e.ctx, &decreev1.GetArtifactRequest{MessageId: id, Name: name})
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for {
		r, err := st.Recv()
		if errors.Is(err, io.EOF) {
			return b.String()
		}
		if err != nil {
			t.Fatalf("GetArtifact %s %s: %v", id, name, err)
		}
		b.Write(r.GetData())
	}
}

// TestAPIWatchMessage: WatchMessage delivers events and each attempt's log
// in order, ends with the outcome, resumes from any cursor, and the
// response to SubmitMessage carries no body.
func TestAPIWatchMessage(t *testing.T) {
	e := newAPIEnv(t)
	body := strings.Repeat("a long body ", 1000)
	resp := e.submit(t, "greet", "echo", body)
	id := resp.GetMessage().GetId()
	if id == "" || resp.GetMessage().GetName() != "greet" || resp.GetMessage().GetRoutine() != "echo" {
		t.Fatalf("submit response %v", resp)
	}
	if n := proto.Size(resp); n > 1024 {
		t.Errorf("SubmitMessageResponse is %d bytes for a %d-byte body; the body must not be echoed", n, len(body))
	}
	w := e.watch(t, id, "", 0)
	if w.outcome == nil || w.outcome.GetState() != decreev1.MessageState_MESSAGE_STATE_DONE || w.outcome.GetAttempts() != 1 {
		t.Fatalf("outcome %v", w.outcome)
	}
	// Order: queued, started, attempt started, log, attempt finished, done, outcome.
	var kinds []string
	for _, it := range w.items {
		switch {
		case it.GetEvent() != nil:
			kinds = append(kinds, strings.TrimPrefix(it.GetEvent().GetKind().String(), "EVENT_KIND_"))
			if k := it.GetEvent().GetKind(); k == decreev1.EventKind_EVENT_KIND_ATTEMPT_FINISHED && it.GetEvent().GetWorkerId() != "w1" {
				t.Errorf("ATTEMPT_FINISHED has worker_id %q, want w1", it.GetEvent().GetWorkerId())
			}
		case it.GetLog() != nil:
			if len(kinds) == 0 || kinds[len(kinds)-1] != "LOG" {
				kinds = append(kinds, "LOG")
			}
		case it.GetOutcome() != nil:
			kinds = append(kinds, "OUTCOME")
		}
	}
	want := "MESSAGE_QUEUED MESSAGE_STARTED ATTEMPT_STARTED LOG ATTEMPT_FINISHED MESSAGE_DONE OUTCOME"
	if got := strings.Join(kinds, " "); got != want {
		t.Errorf("WatchMessage delivered\n %s\nwant\n %s", got, want)
	}
	if want := "hello from " + id + "\nline two\n"; w.log[1] != want {
		t.Errorf("attempt 1 log %q, want %q", w.log[1], want)
	}
	if got := e.artifact(t, id, "routine.log"); got != w.log[1] {
		t.Errorf("routine.log %q differs from the watched log %q", got, w.log[1])
	}
	// Resuming from every cursor yields exactly the rest (log chunks may
	// be cut differently, their bytes may not).
	for i := range w.items {
		rest := e.watch(t, id, w.items[i].GetCursor(), 0)
		want := w.items[i+1:]
		if i == len(w.items)-1 {
			want = w.items[i:] // after the outcome: the outcome again
		}
		if got, exp := summary(rest.items), summary(want); got != exp {
			t.Errorf("resume after item %d:\n got %s\nwant %s", i, got, exp)
		}
	}
	// GetMessage returns the body; ListMessages does not.
	gm, err := e.client.GetMessage(e.ctx, &decreev1.GetMessageRequest{Id: id})
	if err != nil || string(gm.GetBody()) != body {
		t.Errorf("GetMessage body: %v (%d bytes)", err, len(gm.GetBody()))
	}
}

// summary renders watch items as event kinds, log bytes and the outcome.
func summary(items []*decreev1.WatchMessageResponse) string {
	var b strings.Builder
	for _, it := range items {
		switch {
		case it.GetEvent() != nil:
			fmt.Fprintf(&b, "[%s]", it.GetEvent().GetKind())
		case it.GetLog() != nil:
			b.Write(it.GetLog().GetData())
		case it.GetOutcome() != nil:
			fmt.Fprintf(&b, "[%s]", it.GetOutcome().GetState())
		}
	}
	return b.String()
}

// TestAPIWatchQueuedAndDead: a message can be followed before its first
// attempt (while another runs), and a failing one ends dead with a reason.
func TestAPIWatchQueuedAndDead(t *testing.T) {
	e := newAPIEnv(t)
	blocker := e.submit(t, "blocker", "slow", "hold the loop")
	failing := e.submit(t, "failing", "fail", "x")
	first := e.watch(t, failing.GetMessage().GetId(), "", 1)
	if k := first.items[0].GetEvent().GetKind(); k != decreev1.EventKind_EVENT_KIND_MESSAGE_QUEUED {
		t.Fatalf("first item of a queued message: %v", first.items[0])
	}
	if _, err := e.client.CancelMessage(e.ctx, &decreev1.CancelMessageRequest{Id: blocker.GetMessage().GetId(), Reason: "make room"}); err != nil {
		t.Fatal(err)
	}
	w := e.watch(t, failing.GetMessage().GetId(), first.items[0].GetCursor(), 0)
	o := w.outcome
	if o == nil || o.GetState() != decreev1.MessageState_MESSAGE_STATE_DEAD || !strings.HasPrefix(o.GetReason(), "RetriesExhausted") || o.GetAttempts() != 2 {
		t.Fatalf("outcome %v", o)
	}
	if w.log[1] != "failing on purpose\n" || w.log[2] != "failing on purpose\n" {
		t.Errorf("logs of both attempts: %q", w.log)
	}
}

// TestAPISubmitValidation: what could never run is refused before
// anything is queued, with the code and the names a client needs.
func TestAPISubmitValidation(t *testing.T) {
	e := newAPIEnv(t)
	cases := []struct {
		name   string
		req    *decreev1.SubmitMessageRequest
		code   codes.Code
		substr string
	}{
		{"unknown routine", &decreev1.SubmitMessageRequest{Name: "x", Fields: []*decreev1.Field{{Key: "routine", Value: "nope"}}},
			codes.FailedPrecondition, `routine "nope" does not exist; available routines: develop, echo, fail, rust-develop, slow, spawn`},
		{"disabled routine", &decreev1.SubmitMessageRequest{Name: "x", Fields: []*decreev1.Field{{Key: "routine", Value: "off"}}},
			codes.FailedPrecondition, "disabled"},
		{"routine outside", &decreev1.SubmitMessageRequest{Name: "x", Fields: []*decreev1.Field{{Key: "routine", Value: "../hello"}}},
			codes.InvalidArgument, "routine name"},
		{"name outside", &decreev1.SubmitMessageRequest{Name: "../hello"}, codes.InvalidArgument, "path separator"},
		{"key with newline", &decreev1.SubmitMessageRequest{Name: "x", Fields: []*decreev1.Field{{Key: "a\nb", Value: "1"}}},
			codes.InvalidArgument, "field key"},
		{"key with colon", &decreev1.SubmitMessageRequest{Name: "x", Fields: []*decreev1.Field{{Key: "a:b", Value: "1"}}},
			codes.InvalidArgument, "field key"},
		{"reserved key", &decreev1.SubmitMessageRequest{Name: "x", Fields: []*decreev1.Field{{Key: "chain", Value: "1"}}},
			codes.InvalidArgument, "derived by decree"},
		{"bad request_id", &decreev1.SubmitMessageRequest{Name: "x", RequestId: "has\ttab"}, codes.InvalidArgument, "request_id"},
	}
	for _, tc := range cases {
		_, err := e.client.SubmitMessage(e.ctx, tc.req)
		if status.Code(err) != tc.code || !strings.Contains(status.Convert(err).Message(), tc.substr) {
			t.Errorf("%s: got %v, want %s containing %q", tc.name, err, tc.code, tc.substr)
		}
		if err != nil && strings.Contains(status.Convert(err).Message(), e.c.Project) {
			t.Errorf("%s: error names the server path: %v", tc.name, err)
		}
	}
	list, err := e.client.ListMessages(e.ctx, &decreev1.ListMessagesRequest{})
	if err != nil || len(list.GetMessages()) != 0 {
		t.Errorf("refused submissions left messages: %v %v", list.GetMessages(), err)
	}
}

// TestAPIIdempotentSubmit: a retried submit returns the first result, also
// after a controller restart; the key with another body is refused.
func TestAPIIdempotentSubmit(t *testing.T) {
	e := newAPIEnv(t)
	req := &decreev1.SubmitMessageRequest{Name: "once", Body: []byte("do it once"), RequestId: "3f9c-retry-key",
		Fields: []*decreev1.Field{{Key: "routine", Value: "echo"}}}
	first, err := e.client.SubmitMessage(e.ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	again, err := e.client.SubmitMessage(e.ctx, req)
	if err != nil || again.GetMessage().GetId() != first.GetMessage().GetId() || !again.GetReplayed() || first.GetReplayed() {
		t.Fatalf("retry: %v %v (first %v)", again, err, first)
	}
	other := &decreev1.SubmitMessageRequest{Name: "once", Body: []byte("something else"), RequestId: req.RequestId}
	if _, err := e.client.SubmitMessage(e.ctx, other); status.Code(err) != codes.AlreadyExists {
		t.Errorf("key reused for another body: %v, want AlreadyExists", err)
	}
	if w := e.watch(t, first.GetMessage().GetId(), "", 0); w.outcome.GetState() != decreev1.MessageState_MESSAGE_STATE_DONE {
		t.Fatalf("outcome %v", w.outcome)
	}
	e.c.StopController()
	// Simulate a controller killed between writing the message and
	// recording its id: the record still says "pending" with its chain.
	recPath := requestRecord(t, e.c.Project, req.RequestId)
	rec := readJSON(t, recPath)
	delete(rec, "message_id")
	delete(rec, "file")
	writeJSON(t, recPath, rec)
	// And one killed before the message was written: a pending record of
	// a chain nobody used yet.
	lost := &decreev1.SubmitMessageRequest{Name: "lost", Body: []byte("y"), RequestId: "lost-key",
		Fields: []*decreev1.Field{{Key: "routine", Value: "echo"}}}
	lostChain := "2020010100000000"
	writeJSON(t, requestRecord(t, e.c.Project, lost.RequestId), map[string]any{
		"key": lost.RequestId, "digest": rec["digest"], "chain": lostChain, "created": time.Now().Format(time.RFC3339Nano)})
	e.c.StartController()
	client := decreev1.NewControllerServiceClient(e.c.Dial())
	after, err := client.SubmitMessage(e.ctx, req)
	if err != nil || after.GetMessage().GetId() != first.GetMessage().GetId() || !after.GetReplayed() {
		t.Fatalf("retry after a restart: %v %v", after, err)
	}
	list, err := client.ListMessages(e.ctx, &decreev1.ListMessagesRequest{})
	if err != nil || len(list.GetMessages()) != 1 || list.GetMessages()[0].GetState() != decreev1.MessageState_MESSAGE_STATE_DONE {
		t.Errorf("messages after three submits of one key: %v %v", list.GetMessages(), err)
	}
	// The pending record's digest is of another request: refused.
	if _, err := client.SubmitMessage(e.ctx, lost); status.Code(err) != codes.AlreadyExists {
		t.Errorf("pending record with another digest: %v", err)
	}
	rec2 := readJSON(t, requestRecord(t, e.c.Project, lost.RequestId))
	rec2["digest"] = digestOf(t, client, e.ctx, e.c.Project, lost)
	writeJSON(t, requestRecord(t, e.c.Project, lost.RequestId), rec2)
	got, err := client.SubmitMessage(e.ctx, lost)
	if err != nil || got.GetMessage().GetChain() != lostChain || got.GetReplayed() {
		t.Fatalf("retry of a submission lost before its message was written: %v %v", got, err)
	}
	again2, err := client.SubmitMessage(e.ctx, lost)
	if err != nil || again2.GetMessage().GetId() != got.GetMessage().GetId() || !again2.GetReplayed() {
		t.Errorf("second retry: %v %v", again2, err)
	}
}

// requestRecord is the file of an idempotency key in .decree/requests/.
func requestRecord(t *testing.T, project, key string) string {
	sum := sha256.Sum256([]byte(key))
	return filepath.Join(project, ".decree", "requests", hex.EncodeToString(sum[:])+".json")
}

// digestOf learns the digest the controller records for req by submitting
// it under a throwaway key and reading that record.
func digestOf(t *testing.T, c decreev1.ControllerServiceClient, ctx context.Context, project string, req *decreev1.SubmitMessageRequest) string {
	t.Helper()
	probe := proto.Clone(req).(*decreev1.SubmitMessageRequest)
	probe.RequestId = "probe-" + req.RequestId
	r, err := c.SubmitMessage(ctx, probe)
	if err != nil {
		t.Fatal(err)
	}
	if r.GetMessage().GetId() == "" {
		t.Fatal("probe not queued")
	}
	return readJSON(t, requestRecord(t, project, probe.RequestId))["digest"].(string)
}

func readJSON(t *testing.T, path string) map[string]any {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]any{}
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func writeJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, _ := json.Marshal(v)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestAPICancel: CancelMessage returns only once the routine has stopped
// and the final event is out; a finished message cannot be cancelled.
func TestAPICancel(t *testing.T) {
	e := newAPIEnv(t)
	id := e.submit(t, "long", "slow", "x").GetMessage().GetId()
	started := e.watch(t, id, "", 4) // queued, started, attempt started, first log chunk
	if started.items[3].GetLog() == nil {
		t.Fatalf("fourth item is not the log: %v", started.items[3])
	}
	pidFile := filepath.Join(e.c.Project, ".decree", "runs", id, "slow.pid")
	pidText, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(pidText)))
	resp, err := e.client.CancelMessage(e.ctx, &decreev1.CancelMessageRequest{Id: id, Reason: "changed my mind"})
	if err != nil {
		t.Fatal(err)
	}
	if resp.GetMessage().GetState() != decreev1.MessageState_MESSAGE_STATE_DEAD {
		t.Errorf("cancel response %v", resp)
	}
	if err := syscall.Kill(pid, 0); err == nil {
		t.Errorf("routine %d still runs after CancelMessage returned", pid)
	}
	logSize := len(e.artifact(t, id, "routine.log"))
	// The final event is already in the log: a replay ends at once.
	w := e.watch(t, id, started.items[2].GetCursor(), 0)
	if w.outcome == nil || w.outcome.GetState() != decreev1.MessageState_MESSAGE_STATE_DEAD || !strings.Contains(w.outcome.GetReason(), "Cancelled") {
		t.Fatalf("outcome after cancel: %v", w.outcome)
	}
	time.Sleep(300 * time.Millisecond) // the routine printed every 50 ms
	if n := len(e.artifact(t, id, "routine.log")); n != logSize {
		t.Errorf("routine.log grew from %d to %d bytes after CancelMessage returned", logSize, n)
	}
	if _, err := e.client.CancelMessage(e.ctx, &decreev1.CancelMessageRequest{Id: id}); status.Code(err) != codes.FailedPrecondition {
		t.Errorf("cancelling a dead message: %v, want FailedPrecondition", err)
	}
	done := e.submit(t, "quick", "echo", "x").GetMessage().GetId()
	e.watch(t, done, "", 0)
	if _, err := e.client.CancelMessage(e.ctx, &decreev1.CancelMessageRequest{Id: done}); status.Code(err) != codes.FailedPrecondition {
		t.Errorf("cancelling a done message: %v, want FailedPrecondition", err)
	}
}

// TestAPIChainsPagesAndIDs: a chain lists by seq, pages without gaps or
// repeats, and a follow-up that cannot parse is a message of its own.
func TestAPIChainsPagesAndIDs(t *testing.T) {
	e := newAPIEnv(t)
	root := e.submit(t, "parent", "spawn", "x").GetMessage()
	w := e.watch(t, root.GetId(), "", 0)
	if w.outcome.GetState() != decreev1.MessageState_MESSAGE_STATE_DONE {
		t.Fatalf("parent outcome %v", w.outcome)
	}
	chain := root.GetChain()
	// Wait for the chain to finish: both good follow-ups run.
	ew, err := e.client.WatchEvents(e.ctx, &decreev1.WatchEventsRequest{Chain: chain, Follow: true})
	if err != nil {
		t.Fatal(err)
	}
	deadIDs := map[string]int{}
	for {
		r, err := ew.Recv()
		if err != nil {
			t.Fatal(err)
		}
		ev := r.GetEvent()
		if ev.GetKind() == decreev1.EventKind_EVENT_KIND_MESSAGE_DEAD {
			deadIDs[ev.GetMessageId()]++
		}
		if ev.GetKind() == decreev1.EventKind_EVENT_KIND_CHAIN_FINISHED {
			break
		}
	}
	var all []*decreev1.MessageInfo
	token := ""
	for pages := 0; ; pages++ {
		resp, err := e.client.ListMessages(e.ctx, &decreev1.ListMessagesRequest{Chain: chain, PageSize: 2, PageToken: token})
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.GetMessages()) > 2 {
			t.Fatalf("page of %d", len(resp.GetMessages()))
		}
		all = append(all, resp.GetMessages()...)
		if token = resp.GetNextPageToken(); token == "" {
			break
		}
		if pages > 5 {
			t.Fatal("too many pages")
		}
	}
	var got []string
	ids := map[string]bool{}
	for _, m := range all {
		got = append(got, fmt.Sprintf("%d:%s", m.GetSeq(), strings.TrimPrefix(m.GetState().String(), "MESSAGE_STATE_")))
		if ids[m.GetId()] {
			t.Errorf("id %s listed twice", m.GetId())
		}
		ids[m.GetId()] = true
	}
	if want := "0:DONE 1:DONE 2:DONE 3:DEAD"; strings.Join(got, " ") != want {
		t.Errorf("chain listed as %s, want %s", strings.Join(got, " "), want)
	}
	badID := chain + "-3"
	if deadIDs[badID] != 1 || len(deadIDs) != 1 {
		t.Errorf("MESSAGE_DEAD events by id: %v, want one for %s", deadIDs, badID)
	}
	// The parent's own watch ended done, with no dead event of its id.
	for _, it := range w.items {
		if it.GetEvent().GetKind() == decreev1.EventKind_EVENT_KIND_MESSAGE_DEAD {
			t.Errorf("parent's watch carries a dead event: %v", it.GetEvent())
		}
	}
	runs, err := e.client.ListRuns(e.ctx, &decreev1.ListRunsRequest{PageSize: 1})
	if err != nil || len(runs.GetRuns()) != 1 || runs.GetNextPageToken() == "" {
		t.Fatalf("ListRuns page 1: %v %v", runs, err)
	}
	runs2, err := e.client.ListRuns(e.ctx, &decreev1.ListRunsRequest{PageSize: 10, PageToken: runs.GetNextPageToken()})
	if err != nil || len(runs2.GetRuns()) != 2 || runs2.GetRuns()[0].GetMessageId() == runs.GetRuns()[0].GetMessageId() {
		t.Errorf("ListRuns page 2: %v %v", runs2, err)
	}
}

// TestAPIHealthAndErrors: health answers without a token for each service,
// reflection with the client token; errors carry codes a client can act on
// and neither server paths nor decreectl flags.
func TestAPIHealthAndErrors(t *testing.T) {
	e := newAPIEnv(t)
	anon := e.c.DialNoToken()
	hc := healthpb.NewHealthClient(anon)
	for _, svc := range []string{"", "decree.v1.ControllerService", "decree.v1.WorkerService"} {
		r, err := hc.Check(e.ctx, &healthpb.HealthCheckRequest{Service: svc})
		if err != nil || r.GetStatus() != healthpb.HealthCheckResponse_SERVING {
			t.Errorf("health %q without a token: %v %v", svc, r, err)
		}
	}
	_, err := decreev1.NewControllerServiceClient(anon).GetStatus(e.ctx, &decreev1.GetStatusRequest{})
	msg := status.Convert(err).Message()
	if status.Code(err) != codes.Unauthenticated || strings.Contains(msg, "decreectl") || strings.Contains(msg, "--") {
		t.Errorf("no token: %v", err)
	}
	if services := reflectServices(t, e.ctx, e.c.Dial()); !strings.Contains(services, "decree.v1.ControllerService") || !strings.Contains(services, "grpc.health.v1.Health") {
		t.Errorf("reflection lists %s", services)
	}

	id := e.submit(t, "one", "echo", "x").GetMessage().GetId()
	e.watch(t, id, "", 0)
	checks := []struct {
		name string
		call func() error
		code codes.Code
	}{
		{"artifact past the end", func() error {
			return recvErr(e.client.GetArtifact(e.ctx, &decreev1.GetArtifactRequest{MessageId: id, Name: "routine.log", Offset: 1 << 20}))
		}, codes.OutOfRange},
		{"log past the end", func() error {
			return recvErr(e.client.WatchLogs(e.ctx, &decreev1.WatchLogsRequest{MessageId: id, Attempt: 1, Offset: 1 << 20}))
		}, codes.OutOfRange},
		{"unknown artifact", func() error {
			return recvErr(e.client.GetArtifact(e.ctx, &decreev1.GetArtifactRequest{MessageId: id, Name: "nope.txt"}))
		}, codes.NotFound},
		{"unknown message", func() error {
			_, err := e.client.GetMessage(e.ctx, &decreev1.GetMessageRequest{Id: "2020010100000000-0"})
			return err
		}, codes.NotFound},
		{"unknown state filter", func() error {
			_, err := e.client.ListMessages(e.ctx, &decreev1.ListMessagesRequest{States: []decreev1.MessageState{99}})
			return err
		}, codes.InvalidArgument},
		{"bad page token", func() error {
			_, err := e.client.ListMessages(e.ctx, &decreev1.ListMessagesRequest{PageToken: "garbage!"})
			return err
		}, codes.InvalidArgument},
		{"watch a bad cursor", func() error {
			return recvErr(e.client.WatchMessage(e.ctx, &decreev1.WatchMessageRequest{MessageId: id, Cursor: "nope"}))
		}, codes.InvalidArgument},
		{"requeue an unknown dead letter", func() error {
			_, err := e.client.RequeueMessage(e.ctx, &decreev1.RequeueMessageRequest{Id: "nothing-here"})
			return err
		}, codes.NotFound},
	}
	for _, c := range checks {
		err := c.call()
		msg := status.Convert(err).Message()
		if status.Code(err) != c.code {
			t.Errorf("%s: %v, want %s", c.name, err, c.code)
		}
		if strings.Contains(msg, e.c.Project) || strings.Contains(msg, "decreectl") {
			t.Errorf("%s: message names a server path or decreectl: %q", c.name, msg)
		}
	}
}

// recvErr returns the first error of a server stream (nil at its end).
func recvErr[T any](st interface{ Recv() (T, error) }, err error) error {
	if err != nil {
		return err
	}
	for {
		if _, err := st.Recv(); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
	}
}

// reflectServices lists the services reflection reports.
func reflectServices(t *testing.T, ctx context.Context, conn *grpc.ClientConn) string {
	t.Helper()
	st, err := reflectionpb.NewServerReflectionClient(conn).ServerReflectionInfo(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Send(&reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{}}); err != nil {
		t.Fatal(err)
	}
	r, err := st.Recv()
	if err != nil {
		t.Fatalf("reflection: %v", err)
	}
	var names []string
	for _, s := range r.GetListServicesResponse().GetService() {
		names = append(names, s.GetName())
	}
	return strings.Join(names, " ")
}
