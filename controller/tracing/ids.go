package tracing

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"strconv"

	"go.opentelemetry.io/otel/trace"
)

// TraceID is the trace of a message of the project with instance id.
func TraceID(instance, messageID string) trace.TraceID {
	sum := sha256.Sum256([]byte("decree trace\x00" + instance + "\x00" + messageID))
	var id trace.TraceID
	copy(id[:], sum[:])
	return id
}

// MessageSpanID is the id of a message's root span.
func MessageSpanID(instance, messageID string) trace.SpanID {
	return spanID("message", instance, messageID)
}

// AttemptSpanID is the id of an attempt's span.
func AttemptSpanID(instance, messageID string, attempt int) trace.SpanID {
	return spanID("attempt "+strconv.Itoa(attempt), instance, messageID)
}

func spanID(what, instance, messageID string) trace.SpanID {
	sum := sha256.Sum256([]byte("decree span\x00" + what + "\x00" + instance + "\x00" + messageID))
	var id trace.SpanID
	copy(id[:], sum[:])
	return id
}

// Traceparent is the W3C traceparent of an attempt's span, as the routine
// gets it in TRACEPARENT.
func Traceparent(instance, messageID string, attempt int) string {
	return "00-" + TraceID(instance, messageID).String() + "-" + AttemptSpanID(instance, messageID, attempt).String() + "-01"
}

// wantIDs asks the id generator for given ids: the next span started with
// this context gets them.
type wantKey struct{}

type wanted struct {
	trace trace.TraceID
	span  trace.SpanID
}

func withIDs(ctx context.Context, tid trace.TraceID, sid trace.SpanID) context.Context {
	return context.WithValue(ctx, wantKey{}, wanted{tid, sid})
}

// idGenerator returns the wanted ids when the context names them, random
// ones otherwise.
type idGenerator struct{}

func (idGenerator) NewIDs(ctx context.Context) (trace.TraceID, trace.SpanID) {
	if w, ok := ctx.Value(wantKey{}).(wanted); ok {
		return w.trace, w.span
	}
	var tid trace.TraceID
	var sid trace.SpanID
	_, _ = rand.Read(tid[:])
	_, _ = rand.Read(sid[:])
	return tid, sid
}

func (idGenerator) NewSpanID(ctx context.Context, _ trace.TraceID) trace.SpanID {
	if w, ok := ctx.Value(wantKey{}).(wanted); ok {
		return w.span
	}
	var sid trace.SpanID
	_, _ = rand.Read(sid[:])
	return sid
}
