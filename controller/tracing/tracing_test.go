package tracing

import (
	"regexp"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/decreehq/decree/controller/events"
)

func TestTraceparent(t *testing.T) {
	tp := Traceparent("inst", "20261125120000-0", 2)
	if !regexp.MustCompile(`^00-[0-9a-f]{32}-[0-9a-f]{16}-01$`).MatchString(tp) {
		t.Fatalf("traceparent %q is not W3C", tp)
	}
	if tp != Traceparent("inst", "20261125120000-0", 2) {
		t.Error("not deterministic")
	}
	for _, other := range []string{Traceparent("inst", "20261125120000-0", 1), Traceparent("inst2", "20261125120000-0", 2), Traceparent("inst", "20261125120000-1", 2)} {
		if other == tp {
			t.Errorf("%s collides", other)
		}
	}
	if TraceID("inst", "a") == TraceID("inst", "b") || MessageSpanID("inst", "a") == AttemptSpanID("inst", "a", 1) {
		t.Error("ids collide")
	}
}

// TestSpansFromEvents: the events of one message with a failed and a
// successful attempt and a hook become one trace: the root, a checkpoint,
// two attempts with the derived ids under the root, the hook under the
// first attempt, diffs after each; statuses and CI/CD attributes set.
func TestSpansFromEvents(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tr := New(sdktrace.WithSpanProcessor(rec))
	tr.instance = "inst"
	id := "20261125120000-0"
	t0 := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	for _, e := range []*events.Event{
		{Kind: events.MessageQueued, MessageID: id, Time: at(0)},
		{Kind: events.MessageStarted, MessageID: id, Routine: "develop", Chain: "20261125120000", Time: at(1)},
		{Kind: events.AttemptStarted, MessageID: id, Attempt: 1, Routine: "develop", Time: at(2)},
		{Kind: events.HookFinished, MessageID: id, Attempt: 1, ExitCode: 0, Text: "beforeEach (lint)", Time: at(3)},
		{Kind: events.AttemptFinished, MessageID: id, Attempt: 1, ExitCode: 1, Text: "exit 1", WorkerID: "w1", Time: at(5)},
		{Kind: events.AttemptStarted, MessageID: id, Attempt: 2, Routine: "develop", Time: at(6)},
		{Kind: events.AttemptFinished, MessageID: id, Attempt: 2, WorkerID: "w2", Time: at(8)},
		{Kind: events.MessageDone, MessageID: id, Routine: "develop", Time: at(9)},
	} {
		tr.observe(e)
	}
	spans := rec.Ended()
	byName := map[string]sdktrace.ReadOnlySpan{}
	for _, s := range spans {
		if s.SpanContext().TraceID() != TraceID("inst", id) {
			t.Errorf("span %s in trace %s", s.Name(), s.SpanContext().TraceID())
		}
		byName[s.Name()] = s
	}
	root := byName["RUN develop"]
	if root == nil || root.Parent().IsValid() || root.SpanContext().SpanID() != MessageSpanID("inst", id) {
		t.Fatalf("no root span with the message's id among %d spans", len(spans))
	}
	if !root.StartTime().Equal(at(1)) || !root.EndTime().Equal(at(9)) {
		t.Errorf("root %v..%v", root.StartTime(), root.EndTime())
	}
	for n, want := range map[int]string{1: "failure", 2: "success"} {
		a := byName["attempt "+string(rune('0'+n))]
		if a == nil {
			t.Fatalf("no attempt %d span", n)
		}
		if a.SpanContext().SpanID() != AttemptSpanID("inst", id, n) || a.Parent().SpanID() != root.SpanContext().SpanID() {
			t.Errorf("attempt %d: id %s parent %s", n, a.SpanContext().SpanID(), a.Parent().SpanID())
		}
		var result string
		for _, kv := range a.Attributes() {
			if kv.Key == "cicd.pipeline.task.run.result" {
				result = kv.Value.AsString()
			}
		}
		if result != want {
			t.Errorf("attempt %d result %q, want %q", n, result, want)
		}
	}
	if h := byName["hook beforeEach (lint)"]; h == nil || h.Parent().SpanID() != AttemptSpanID("inst", id, 1) {
		t.Error("the hook is not a child of attempt 1")
	}
	if c := byName["checkpoint"]; c == nil || !c.StartTime().Equal(at(1)) || !c.EndTime().Equal(at(2)) {
		t.Error("no checkpoint span from the message's start to the first attempt")
	}
	if len(tr.messages) != 0 {
		t.Errorf("%d messages still remembered after done", len(tr.messages))
	}
}
