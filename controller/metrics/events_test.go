package metrics

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/decreehq/decree/controller/events"
)

func TestAttemptOutcome(t *testing.T) {
	tests := []struct {
		code int
		text string
		want string
	}{
		{0, "", "succeeded"},
		{1, "", "failed"},
		{0, "afterEach hook failed: x", "failed"},
		{-1, "worker lost: w1 did not renew its lease within 10s", "worker_lost"},
		{-1, "interrupted: the controller stopped during the attempt", "interrupted"},
		{-1, "controller restarted during the attempt", "interrupted"},
	}
	for _, tt := range tests {
		if got := AttemptOutcome(&events.Event{ExitCode: tt.code, Text: tt.text}); got != tt.want {
			t.Errorf("exit %d %q: %s, want %s", tt.code, tt.text, got, tt.want)
		}
	}
}

func TestDeadReason(t *testing.T) {
	tests := map[string]string{
		"MaxAttempts: routine develop failed 3 times":     "MaxAttempts",
		"InvalidRoutine: CRLF":                            "InvalidRoutine",
		"no reason here":                                  "other",
		"weird reason with spaces: x":                     "other",
		"20261125120000-0: an id must not become a label": "other",
		"20261125120000: nor a number":                    "other",
		"":                                                "other",
	}
	for text, want := range tests {
		if got := DeadReason(text); got != want {
			t.Errorf("DeadReason(%q) = %q, want %q", text, got, want)
		}
	}
}

// TestNamesAreDocumented: every exported metric is listed by Names and
// described in the README's metrics table.
func TestNamesAreDocumented(t *testing.T) {
	names := Names()
	if len(names) < 12 || !slices.Contains(names, RunnableMetric) {
		t.Fatalf("Names() = %v", names)
	}
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		if !strings.HasPrefix(n, "decree_") {
			t.Errorf("metric %s lacks the decree_ prefix", n)
		}
		if !strings.Contains(string(readme), "`"+n+"`") {
			t.Errorf("README does not document `%s`", n)
		}
	}
}
