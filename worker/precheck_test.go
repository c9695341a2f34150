package worker_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/decreehq/decree/internal/testtool"
	decreev1 "github.com/decreehq/decree/proto/decree/v1"
	"github.com/decreehq/decree/worker"
)

// A pre-check runs the routine with DECREE_PRE_CHECK=true and returns its
// output with the exit status; the routine's normal work does not run.
func TestPreCheckReturnsOutput(t *testing.T) {
	testtool.Require(t, "bash")
	src := `if [ "${DECREE_PRE_CHECK:-}" = true ]; then
  if [ -f ready ]; then exit 0; fi
  echo "file ready is missing"; exit 4
fi
echo worked > worked.txt`
	tests := []struct {
		name     string
		ready    bool
		wantCode int32
		wantOut  string
	}{
		{"not ready", false, 4, "file ready is missing\n"},
		{"ready", true, 0, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ws := workspace(t, map[string]string{"develop": src})
			if tt.ready {
				if err := os.WriteFile(filepath.Join(ws, "ready"), nil, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			fake := newFakeController()
			startServer(t, sockOf(ws), fake)
			a := routineAssignment("lease-pre", "develop")
			a.Kind = decreev1.AssignmentKind_ASSIGNMENT_KIND_PRE_CHECK
			a.MessageId, a.MessageDir, a.RunFiles = "", "", nil
			fake.assign(a)
			runWorker(t, worker.Options{Workspace: ws})
			c := waitCompletion(t, fake, 20*time.Second)
			if c.GetStatus().GetExitCode() != tt.wantCode || string(c.GetOutput()) != tt.wantOut {
				t.Fatalf("completion = exit %d output %q, want exit %d output %q", c.GetStatus().GetExitCode(), c.GetOutput(), tt.wantCode, tt.wantOut)
			}
			if _, err := os.Stat(filepath.Join(ws, "worked.txt")); err == nil {
				t.Error("the routine's work ran during its pre-check")
			}
		})
	}
}

func TestLogStreamOfPreCheck(t *testing.T) {
	a := &decreev1.Assignment{Kind: decreev1.AssignmentKind_ASSIGNMENT_KIND_PRE_CHECK}
	if got := worker.LogStream(a); got != "pre-check" {
		t.Errorf("LogStream = %q", got)
	}
}
