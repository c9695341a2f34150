package cli

import (
	"strings"
	"testing"
	"time"
)

func TestParseInterval(t *testing.T) {
	for in, want := range map[string]time.Duration{"2s": 2 * time.Second, "2": 2 * time.Second, "0.5": 500 * time.Millisecond, "500ms": 500 * time.Millisecond, "1h": time.Hour} {
		if got, err := parseInterval(in); err != nil || got != want {
			t.Errorf("parseInterval(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for in, want := range map[string]string{"soon": "write a duration", "10ms": "out of range", "2h": "out of range", "-1": "out of range"} {
		if _, err := parseInterval(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("parseInterval(%q) = %v, want an error with %q", in, err, want)
		}
	}
}
