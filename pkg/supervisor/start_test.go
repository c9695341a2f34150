//go:build linux

package supervisor

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/decreehq/decree/internal/testtool"
)

// A supervisor that starts the routine and ends before its report reaches
// the worker (killed, crashed) must not lead to a second start: one Start
// runs the routine at most once and says it may have run. The fault is
// injected with a stand-in supervisor that reads the request, "runs the
// routine" (a line in a ledger) and exits without a report. (Supervisors
// started ahead of need used to take such an end for a spare that died
// unused and sent the request again to a fresh one: a follow-up ran twice
// inside one assignment.)
func TestNoSecondStartAfterSupervisorDiesUnreported(t *testing.T) {
	testtool.Require(t, "bash")
	dir := t.TempDir()
	ledger := filepath.Join(dir, "ledger")
	fake := filepath.Join(dir, "decree-supervisor")
	script := fmt.Sprintf("#!/bin/bash\nread -r -t 5 request <&3\necho started >> %q\nexit 1\n", ledger)
	if err := os.WriteFile(fake, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	saved := program
	program = func() string { return fake }
	t.Cleanup(func() { program = saved })
	for i := 1; i <= 3; i++ {
		_, err := Start(Spec{Path: "/bin/true", Env: os.Environ(), Grace: time.Second})
		if err == nil || !strings.Contains(err.Error(), "not started again") {
			t.Errorf("Start %d with a supervisor that died unreported: %v; want an error saying it was not started again", i, err)
		}
		b, _ := os.ReadFile(ledger)
		if got := strings.Count(string(b), "started\n"); got != i {
			t.Fatalf("after %d Starts the routine was started %d times", i, got)
		}
	}
}

// TestProgramBeside: the small supervisor program beside the executable
// is used only when it answers with this package's protocol.
func TestProgramBeside(t *testing.T) {
	for _, tc := range []struct {
		name, script string
		want         bool
	}{
		{"same protocol", "#!/bin/sh\necho " + Protocol + "\n", true},
		{"another protocol", "#!/bin/sh\necho decree-attempt-supervisor/1\n", false},
		{"broken", "#!/bin/sh\nexit 3\n", false},
		{"missing", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			sibling := filepath.Join(dir, "decree-supervisor")
			if tc.script != "" {
				if err := os.WriteFile(sibling, []byte(tc.script), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			got := programBeside(filepath.Join(dir, "decree-worker"))
			if want := map[bool]string{true: sibling, false: selfExe()}[tc.want]; got != want {
				t.Errorf("programBeside = %s, want %s", got, want)
			}
		})
	}
}

func TestLastWins(t *testing.T) {
	got := strings.Join(lastWins([]string{"A=1", "B=2", "A=3", "C", "B=4"}), " ")
	if want := "A=3 C B=4"; got != want {
		t.Errorf("lastWins = %q, want %q", got, want)
	}
}
