package metrics

import (
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
