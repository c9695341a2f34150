// Package tracing turns a controller's work into OpenTelemetry traces,
// exported over OTLP/gRPC. It is off unless OTEL_EXPORTER_OTLP_ENDPOINT (or
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) is set; the exporter reads the other
// standard OTEL_EXPORTER_OTLP_* variables (headers, certificates,
// OTEL_EXPORTER_OTLP_INSECURE for a plain-text collector) and OTEL_BSP_*
// for batching, and OTEL_SERVICE_NAME / OTEL_RESOURCE_ATTRIBUTES name the
// service.
//
// One message is one trace. Its root span ("RUN <routine>") lasts from
// processing start to done or dead; children are the checkpoint taken
// before the first attempt and one span per attempt ("attempt N"), whose
// children are the hooks around it, the routine as the worker ran it (from
// the assignment's delivery to its report) and the diff taken after it.
// Attributes follow OTel's CI/CD conventions (cicd.pipeline.name,
// cicd.pipeline.run.id, cicd.pipeline.result, cicd.pipeline.task.*,
// cicd.worker.id) plus decree.* ones.
//
// Spans are built from outside the processing loop: from the event log
// (controller/events) and from the WorkerService calls that deliver
// assignments and take their reports (gRPC interceptors). The trace id of
// a message and the span id of each attempt are derived from the project's
// instance id and the message id (SHA-256), so the routine's TRACEPARENT
// (added to every assignment of a message attempt) is known before the
// attempt's span is written, and a controller restarted mid-message keeps
// adding to the same trace.
package tracing

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"sync"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/decreehq/decree/controller/events"
	"github.com/decreehq/decree/controller/store"
	"go.opentelemetry.io/otel/attribute"
)

// Enabled reports whether the environment asks for traces.
func Enabled() bool {
	return os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
}

// Tracer builds a project's spans.
type Tracer struct {
	tp       *sdktrace.TracerProvider
	tr       trace.Tracer
	log      *slog.Logger
	instance string

	mu       sync.Mutex
	messages map[string]*messageSpan
	leases   map[string]*delivery // lease token -> what was delivered
}

// FromEnv returns a Tracer exporting to the OTLP endpoint of the
// environment, or nil (and no error) when tracing is off. service names
// the process when OTEL_SERVICE_NAME does not.
func FromEnv(ctx context.Context, service string, log *slog.Logger) (*Tracer, error) {
	if !Enabled() {
		return nil, nil
	}
	exp, err := otlptracegrpc.New(ctx)
	if err != nil {
		return nil, fmt.Errorf("OpenTelemetry: OTLP trace exporter for %s: %w", os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT"), err)
	}
	res, err := resource.Merge(resource.Default(), resource.NewSchemaless(attribute.String("service.name", service)))
	if err != nil {
		return nil, err
	}
	if os.Getenv("OTEL_SERVICE_NAME") != "" {
		// The environment wins over our default name.
		res, _ = resource.Merge(res, resource.Environment())
	}
	return New(sdktrace.WithBatcher(exp), sdktrace.WithResource(res)), nil
}

// New returns a Tracer with the given provider options (an exporter);
// Bind must be called before use.
func New(opts ...sdktrace.TracerProviderOption) *Tracer {
	tp := sdktrace.NewTracerProvider(append(opts, sdktrace.WithIDGenerator(idGenerator{}))...)
	return &Tracer{tp: tp, tr: tp.Tracer("github.com/decreehq/decree/controller/tracing"),
		log: slog.New(slog.DiscardHandler), messages: map[string]*messageSpan{}, leases: map[string]*delivery{}}
}

// Bind ties the tracer to a project: its instance id seeds the trace ids.
func (t *Tracer) Bind(st *store.Store, log *slog.Logger) {
	t.instance = st.InstanceID()
	if log != nil {
		t.log = log
	}
}

// Shutdown ends open spans as they are and flushes the exporter.
func (t *Tracer) Shutdown(ctx context.Context) error {
	if t == nil {
		return nil
	}
	t.mu.Lock()
	for id, m := range t.messages {
		m.endAll()
		delete(t.messages, id)
	}
	t.mu.Unlock()
	return t.tp.Shutdown(ctx)
}

// Run follows the event log from its end until ctx ends or the log closes.
func (t *Tracer) Run(ctx context.Context, log *events.Log) {
	log.Follow(ctx, t.observe)
}
