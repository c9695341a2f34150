package pipeline

import (
	"testing"

	decreev1 "github.com/decreehq/decree/proto/decree/v1"
)

func TestPreCheckReason(t *testing.T) {
	tests := []struct {
		output string
		st     *decreev1.ExitStatus
		want   string
	}{
		{"claude is not on PATH\n", &decreev1.ExitStatus{ExitCode: 1}, "claude is not on PATH"},
		{"\n  first\n\nsecond  \n", &decreev1.ExitStatus{ExitCode: 2}, "first; second"},
		{"", &decreev1.ExitStatus{ExitCode: 7}, "exit 7"},
		{"waiting\n", &decreev1.ExitStatus{ExitCode: 1, TimedOut: true}, "waiting; timed out"},
		{"", &decreev1.ExitStatus{ExitCode: -1, Error: "stopped: worker shutting down"}, "stopped: worker shutting down"},
	}
	for _, tt := range tests {
		if got := preCheckReason(tt.output, tt.st); got != tt.want {
			t.Errorf("preCheckReason(%q, %v) = %q, want %q", tt.output, tt.st, got, tt.want)
		}
	}
}
