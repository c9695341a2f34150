package rpc

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/decreehq/decree/controller/events"
	"github.com/decreehq/decree/controller/pipeline"
	"github.com/decreehq/decree/controller/store"
	"github.com/decreehq/decree/pkg/config"
	"github.com/decreehq/decree/pkg/layout"
	decreev1 "github.com/decreehq/decree/proto/decree/v1"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Every domain error reaches clients with the code Status gives it; a
// damaged state.json is data loss, not "no such run".
func TestStatusCodes(t *testing.T) {
	root := t.TempDir()
	st, err := store.Open(root, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	const id = "2025010100000000-0"
	if err := os.MkdirAll(layout.Path(root, layout.Runs, id), 0o755); err != nil {
		t.Fatal(err)
	}
	_, missing := st.OpenRun(id)
	os.WriteFile(filepath.Join(layout.Path(root, layout.Runs, id), layout.StateFile), []byte("{torn"), 0o644)
	_, damaged := st.OpenRun(id)
	_, unknown := st.FindMessage("nope")
	_, _, configErr := config.Parse("config.yml", []byte("max_retries: -3\n"))
	for _, tc := range []struct {
		name string
		err  error
		want codes.Code
	}{
		{"run without state", missing, codes.NotFound},
		{"damaged state.json", damaged, codes.DataLoss},
		{"unknown message", unknown, codes.NotFound},
		{"bad id", store.CheckID("../x"), codes.InvalidArgument},
		{"no replica", ErrReplicaNotServed, codes.Unimplemented},
		{"invalid config.yml", configErr, codes.FailedPrecondition},
		{"slow watcher", fmt.Errorf("watch: %w", &events.SlowWatcherError{Resume: 7}), codes.ResourceExhausted},
		{"already a status", status.Error(codes.Aborted, "x"), codes.Aborted},
		{"anything else", errors.New("boom"), codes.Internal},
	} {
		if tc.err == nil {
			t.Errorf("%s: no error to map", tc.name)
			continue
		}
		if got := status.Code(Status(tc.err)); got != tc.want {
			t.Errorf("%s: %v -> %v, want %v", tc.name, tc.err, got, tc.want)
		}
	}
	if Status(nil) != nil {
		t.Error("Status(nil) != nil")
	}
}

// Every controller event kind has its own API kind.
func TestEventKindsMapOneToOne(t *testing.T) {
	seen := map[decreev1.EventKind]events.Kind{}
	for k, v := range eventKinds {
		if v == decreev1.EventKind_EVENT_KIND_UNSPECIFIED {
			t.Errorf("%s maps to UNSPECIFIED", k)
		}
		if prev, dup := seen[v]; dup {
			t.Errorf("%s and %s both map to %v", k, prev, v)
		}
		seen[v] = k
	}
	if len(seen) != len(decreev1.EventKind_name)-1 {
		t.Errorf("%d of %d API event kinds are produced", len(seen), len(decreev1.EventKind_name)-1)
	}
}

// run.json's times and attempts survive the conversion to RunInfo.
func TestRunRecordProto(t *testing.T) {
	rec := store.RunRecord{MessageID: "2025010100000000-0", Attempts: 2, Outcome: store.OutcomeSucceeded,
		Start: "2025-01-01T10:00:00+01:00", End: "2025-01-01T10:00:02+01:00", DurationMS: 2000,
		AttemptDetails: []store.AttemptRecord{{Attempt: 1, ExitCode: 1}, {Attempt: 2}}}
	p := runRecordProto(rec)
	if p.GetAttempts() != 2 || len(p.GetAttemptDetails()) != 2 || p.GetAttemptDetails()[0].GetExitCode() != 1 ||
		p.GetStartTime().AsTime().Unix() != 1735722000 || p.GetDuration().AsDuration().Seconds() != 2 ||
		p.GetOutcome() != decreev1.RunOutcome_RUN_OUTCOME_SUCCEEDED {
		t.Errorf("RunInfo %v", p)
	}
	if runRecordProto(store.RunRecord{}).GetOutcome() != decreev1.RunOutcome_RUN_OUTCOME_RUNNING {
		t.Error("a record without outcome is not RUNNING")
	}
}

// A watcher cut off for falling behind learns from the status details,
// not from parsing the message, where to resume.
func TestSlowWatcherCarriesResumeSequence(t *testing.T) {
	st := status.Convert(Status(fmt.Errorf("watch: %w", &events.SlowWatcherError{Resume: 42, Buffer: 256})))
	if st.Code() != codes.ResourceExhausted {
		t.Fatalf("code %s", st.Code())
	}
	var info *errdetails.ErrorInfo
	for _, d := range st.Details() {
		if ei, ok := d.(*errdetails.ErrorInfo); ok {
			info = ei
		}
	}
	if info == nil || info.GetReason() != SlowWatcherReason || info.GetMetadata()["resume_sequence"] != "42" {
		t.Fatalf("details %v", st.Details())
	}
}

// Paths under the project root become relative in status messages; the
// code and the details stay.
func TestScrubberKeepsCodeAndDetails(t *testing.T) {
	sc := NewScrubber("/srv/proj")
	in := Status(&pipeline.ConflictError{ID: "x", Paths: []string{"a"}, Err: fmt.Errorf("open /srv/proj/.decree/runs/x/changes.diff: denied")})
	out := status.Convert(sc.Err(in))
	if out.Code() != codes.FailedPrecondition || len(out.Details()) != 1 {
		t.Fatalf("scrubbed %v", out)
	}
	if strings.Contains(out.Message(), "/srv/proj") || !strings.Contains(out.Message(), "open .decree/runs/x/changes.diff") {
		t.Errorf("message %q", out.Message())
	}
	if got := sc.Message("project /srv/proj is busy"); got != "project . is busy" {
		t.Errorf("root alone: %q", got)
	}
}
