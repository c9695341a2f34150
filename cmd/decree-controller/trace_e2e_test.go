package main

import (
	"context"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"

	"github.com/decreehq/decree/internal/testtool"
)

// collector is an OTLP/gRPC trace collector stand-in: it keeps every span
// it is sent.
type collector struct {
	collectortrace.UnimplementedTraceServiceServer
	mu    sync.Mutex
	spans []*tracepb.Span
}

func (c *collector) Export(_ context.Context, req *collectortrace.ExportTraceServiceRequest) (*collectortrace.ExportTraceServiceResponse, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, rs := range req.GetResourceSpans() {
		for _, ss := range rs.GetScopeSpans() {
			c.spans = append(c.spans, ss.GetSpans()...)
		}
	}
	return &collectortrace.ExportTraceServiceResponse{}, nil
}

func (c *collector) snapshot() []*tracepb.Span {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]*tracepb.Span(nil), c.spans...)
}

func startCollector(t *testing.T) (string, *collector) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c := &collector{}
	srv := grpc.NewServer()
	collectortrace.RegisterTraceServiceServer(srv, c)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	return lis.Addr().String(), c
}

func attr(s *tracepb.Span, key string) string {
	for _, kv := range s.GetAttributes() {
		if kv.GetKey() == key {
			if v := kv.GetValue().GetStringValue(); v != "" {
				return v
			}
			return fmt.Sprint(kv.GetValue().GetIntValue())
		}
	}
	return ""
}

// TestOneMessageOneTrace: with OTEL_EXPORTER_OTLP_ENDPOINT pointing at a
// collector stand-in, one message whose first attempt fails yields one
// trace: a root span for the message, a checkpoint span, two attempt spans
// under it with the routine's run under each, and the routine saw its
// attempt's span as TRACEPARENT.
func TestOneMessageOneTrace(t *testing.T) {
	testtool.Require(t, "bash")
	bin := testtool.Binaries(t)
	project := testtool.InitProject(t)
	ledger := filepath.Join(t.TempDir(), "traceparents")
	routine := "#!/usr/bin/env bash\necho \"$DECREE_ATTEMPT $TRACEPARENT\" >> \"$LEDGER\"\n[ \"$DECREE_ATTEMPT\" -ge 2 ]\n"
	if err := os.WriteFile(filepath.Join(project, ".decree", "routines", "develop.sh"), []byte(routine), 0o755); err != nil {
		t.Fatal(err)
	}
	addr, col := startCollector(t)
	ctl := exec.Command(filepath.Join(bin, "decree-controller"), "--project", project, "--metrics-listen", "127.0.0.1:0")
	ctl.Env = append(testtool.CleanEnv(), "OTEL_EXPORTER_OTLP_ENDPOINT=http://"+addr, "OTEL_EXPORTER_OTLP_INSECURE=true", "OTEL_BSP_SCHEDULE_DELAY=100")
	_, sock, _ := startWithMetrics(t, ctl)
	w := exec.Command(filepath.Join(bin, "decree-worker"), "--controller", "unix://"+sock, "--workspace", project, "--id", "w1")
	w.Env = append(testtool.CleanEnv(), "LEDGER="+ledger, "TRACEPARENT=00-11111111111111111111111111111111-2222222222222222-01")
	testtool.Start(t, "decree-worker", w)
	if err := os.WriteFile(filepath.Join(project, ".decree", "inbox", "traced.md"), []byte("trace me\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	var root *tracepb.Span
	testtool.WaitFor(t, 60*time.Second, "the message's root span", func() bool {
		for _, s := range col.snapshot() {
			if len(s.GetParentSpanId()) == 0 && strings.HasPrefix(s.GetName(), "RUN ") {
				root = s
				return true
			}
		}
		return false
	})
	var spans []*tracepb.Span
	for _, s := range col.snapshot() {
		if string(s.GetTraceId()) == string(root.GetTraceId()) {
			spans = append(spans, s)
		}
	}
	if len(spans) != len(col.snapshot()) {
		t.Errorf("%d spans in other traces; one message must be one trace", len(col.snapshot())-len(spans))
	}
	if got := attr(root, "cicd.pipeline.name"); got != "develop" {
		t.Errorf("root cicd.pipeline.name %q", got)
	}
	if got := attr(root, "cicd.pipeline.result"); got != "success" {
		t.Errorf("root cicd.pipeline.result %q", got)
	}
	byName := map[string][]*tracepb.Span{}
	for _, s := range spans {
		byName[s.GetName()] = append(byName[s.GetName()], s)
	}
	if n := len(byName["checkpoint"]); n != 1 {
		t.Errorf("%d checkpoint spans, want 1", n)
	}
	tps := readLines(t, ledger)
	if len(tps) != 2 {
		t.Fatalf("the routine ran %d times: %q", len(tps), tps)
	}
	for i, want := range []string{"failure", "success"} {
		name := fmt.Sprintf("attempt %d", i+1)
		as := byName[name]
		if len(as) != 1 {
			t.Fatalf("%d spans named %q among %d", len(as), name, len(spans))
		}
		a := as[0]
		if string(a.GetParentSpanId()) != string(root.GetSpanId()) {
			t.Errorf("%s is not a child of the message span", name)
		}
		if got := attr(a, "cicd.pipeline.task.run.result"); got != want {
			t.Errorf("%s result %q, want %q", name, got, want)
		}
		wantTP := fmt.Sprintf("%d 00-%s-%s-01", i+1, hex.EncodeToString(root.GetTraceId()), hex.EncodeToString(a.GetSpanId()))
		if tps[i] != wantTP {
			t.Errorf("routine of %s saw TRACEPARENT %q, want %q", name, tps[i], wantTP)
		}
		var routineUnder int
		for _, s := range byName["routine develop"] {
			if string(s.GetParentSpanId()) == string(a.GetSpanId()) {
				routineUnder++
				if attr(s, "cicd.worker.id") != "w1" {
					t.Errorf("routine span of %s: cicd.worker.id %q", name, attr(s, "cicd.worker.id"))
				}
			}
		}
		if routineUnder != 1 {
			t.Errorf("%d routine spans under %s, want 1", routineUnder, name)
		}
		if a.GetStartTimeUnixNano() < root.GetStartTimeUnixNano() || a.GetEndTimeUnixNano() > root.GetEndTimeUnixNano() {
			t.Errorf("%s lies outside its message's span", name)
		}
	}
}
