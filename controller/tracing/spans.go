package tracing

import (
	"context"
	"strconv"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/decreehq/decree/controller/events"
	"github.com/decreehq/decree/controller/metrics"
	decreev1 "github.com/decreehq/decree/proto/decree/v1"
)

// messageSpan is a message being processed.
type messageSpan struct {
	id       string
	routine  string
	root     trace.Span // nil when its start was not seen
	parent   trace.SpanContext
	cpFrom   time.Time // the checkpoint before the first attempt started here
	attempts map[int]*attemptSpan
}

type attemptSpan struct {
	span trace.Span
	sc   trace.SpanContext
	mark time.Time // end of the last child (hook), for the diff span
}

func (m *messageSpan) endAll() {
	for _, a := range m.attempts {
		a.span.End()
	}
	if m.root != nil {
		m.root.End()
	}
}

const maxMessages = 10_000

func (t *Tracer) message(e *events.Event) *messageSpan {
	m := t.messages[e.MessageID]
	if m == nil {
		m = &messageSpan{id: e.MessageID, routine: e.Routine, attempts: map[int]*attemptSpan{},
			parent: trace.NewSpanContext(trace.SpanContextConfig{TraceID: TraceID(t.instance, e.MessageID),
				SpanID: MessageSpanID(t.instance, e.MessageID), TraceFlags: trace.FlagsSampled, Remote: true})}
		if len(t.messages) < maxMessages {
			t.messages[e.MessageID] = m
		}
	}
	return m
}

// under is a context whose span is sc, for starting children of it.
func under(sc trace.SpanContext) context.Context {
	return trace.ContextWithSpanContext(context.Background(), sc)
}

func (t *Tracer) child(parent trace.SpanContext, name string, from, to time.Time, attrs ...attribute.KeyValue) trace.Span {
	_, sp := t.tr.Start(under(parent), name, trace.WithTimestamp(from), trace.WithAttributes(attrs...))
	if !to.IsZero() {
		sp.End(trace.WithTimestamp(to))
	}
	return sp
}

func (t *Tracer) observe(e *events.Event) {
	if e.MessageID == "" {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	switch e.Kind {
	case events.MessageStarted:
		m := t.message(e)
		m.routine = e.Routine
		if m.root == nil {
			ctx := withIDs(context.Background(), m.parent.TraceID(), m.parent.SpanID())
			_, m.root = t.tr.Start(ctx, "RUN "+e.Routine, trace.WithTimestamp(e.Time), trace.WithSpanKind(trace.SpanKindServer),
				trace.WithAttributes(attribute.String("cicd.pipeline.name", e.Routine), attribute.String("cicd.pipeline.run.id", e.MessageID),
					attribute.String("cicd.pipeline.action.name", "RUN"), attribute.String("decree.chain", e.Chain)))
			m.cpFrom = e.Time
		}
	case events.AttemptStarted:
		m := t.message(e)
		if m.routine == "" {
			m.routine = e.Routine
		}
		if !m.cpFrom.IsZero() {
			t.child(m.parent, "checkpoint", m.cpFrom, e.Time, attribute.String("decree.checkpoint", "before the first attempt"))
			m.cpFrom = time.Time{}
		}
		if m.attempts[e.Attempt] != nil {
			return
		}
		ctx := withIDs(under(m.parent), m.parent.TraceID(), AttemptSpanID(t.instance, e.MessageID, e.Attempt))
		_, sp := t.tr.Start(ctx, "attempt "+strconv.Itoa(e.Attempt), trace.WithTimestamp(e.Time),
			trace.WithAttributes(attribute.String("cicd.pipeline.task.name", e.Routine),
				attribute.String("cicd.pipeline.task.run.id", e.MessageID+"/"+strconv.Itoa(e.Attempt)),
				attribute.Int("decree.attempt", e.Attempt)))
		m.attempts[e.Attempt] = &attemptSpan{span: sp, sc: sp.SpanContext(), mark: e.Time}
	case events.HookFinished:
		m := t.message(e)
		parent, a := m.parent, m.attempts[e.Attempt]
		if a != nil {
			parent = a.sc
		}
		from := e.Time
		if d := t.takeDelivery(e.MessageID, e.Attempt, decreev1.AssignmentKind_ASSIGNMENT_KIND_HOOK); d != nil {
			from = d.sent
		}
		sp := t.child(parent, "hook "+e.Text, from, time.Time{}, attribute.String("cicd.pipeline.task.name", e.Text),
			attribute.Int("decree.exit_code", e.ExitCode))
		if e.ExitCode != 0 {
			sp.SetStatus(codes.Error, "hook exited "+strconv.Itoa(e.ExitCode))
		}
		sp.End(trace.WithTimestamp(e.Time))
		if a != nil {
			a.mark = e.Time
		}
	case events.AttemptFinished:
		m := t.message(e)
		a := m.attempts[e.Attempt]
		if a == nil {
			return
		}
		delete(m.attempts, e.Attempt)
		outcome := metrics.AttemptOutcome(e)
		mark := a.mark
		if d := t.takeDelivery(e.MessageID, e.Attempt, decreev1.AssignmentKind_ASSIGNMENT_KIND_ROUTINE); d != nil {
			end := d.reported
			if end.IsZero() {
				end = e.Time
			}
			sp := t.child(a.sc, "routine "+m.routine, d.sent, time.Time{}, attribute.String("cicd.worker.id", e.WorkerID),
				attribute.String("cicd.pipeline.task.name", m.routine), attribute.Int("decree.exit_code", e.ExitCode))
			if outcome != "succeeded" {
				sp.SetStatus(codes.Error, e.Text)
			}
			sp.End(trace.WithTimestamp(end))
			mark = end
		}
		if mark.Before(e.Time) {
			t.child(a.sc, "diff", mark, e.Time, attribute.String("decree.checkpoint", "after the attempt"))
		}
		a.span.SetAttributes(attribute.String("cicd.pipeline.task.run.result", taskResult(outcome)),
			attribute.String("decree.outcome", outcome), attribute.Int("decree.exit_code", e.ExitCode), attribute.String("cicd.worker.id", e.WorkerID))
		if outcome != "succeeded" {
			a.span.SetStatus(codes.Error, e.Text)
		}
		a.span.End(trace.WithTimestamp(e.Time))
	case events.Reverted, events.UsageLimitWait, events.Warning:
		if m := t.messages[e.MessageID]; m != nil && m.root != nil {
			m.root.AddEvent(string(e.Kind), trace.WithTimestamp(e.Time), trace.WithAttributes(attribute.String("decree.text", e.Text)))
		}
	case events.MessageDone, events.MessageDead:
		m := t.messages[e.MessageID]
		delete(t.messages, e.MessageID)
		t.forget(e.MessageID)
		if m == nil {
			return
		}
		for n, a := range m.attempts {
			a.span.End(trace.WithTimestamp(e.Time))
			delete(m.attempts, n)
		}
		if m.root == nil {
			return
		}
		result := "success"
		if e.Kind == events.MessageDead {
			result = "failure"
			m.root.SetStatus(codes.Error, e.Text)
			m.root.SetAttributes(attribute.String("decree.dead_reason", metrics.DeadReason(e.Text)))
		}
		m.root.SetAttributes(attribute.String("cicd.pipeline.result", result))
		m.root.End(trace.WithTimestamp(e.Time))
	}
}

// taskResult maps an attempt's outcome to cicd.pipeline.task.run.result.
func taskResult(outcome string) string {
	switch outcome {
	case "succeeded":
		return "success"
	case "interrupted":
		return "cancellation"
	case "worker_lost":
		return "error"
	}
	return "failure"
}
