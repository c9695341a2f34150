package pipeline

import (
	"strings"
	"testing"
	"time"
)

// TestParseQuestion: good questions keep the routine's option order; bad
// ones say what is wrong.
func TestParseQuestion(t *testing.T) {
	tests := []struct {
		name, in string
		want     []string // option names
		timeout  time.Duration
		err      string
	}{
		{"two options in order", `{"question":"Tabs?","options":{"zebra":"z","apple":"a"}}`, []string{"zebra", "apple"}, 0, ""},
		{"timeout", `{"question":"Q","options":{"yes":""},"timeout":"90m"}`, []string{"yes"}, 90 * time.Minute, ""},
		{"days", `{"question":"Q","options":{"yes":""},"timeout":"2d"}`, []string{"yes"}, 48 * time.Hour, ""},
		{"context", `{"question":"Q","options":{"yes":""},"context":"tree-node:7"}`, []string{"yes"}, 0, ""},
		{"context too long", `{"question":"Q","options":{"yes":""},"context":"` + strings.Repeat("x", 5000) + `"}`, nil, 0, "longer than"},
		{"not json", `question: x`, nil, 0, "not the expected JSON object"},
		{"unknown field", `{"question":"Q","options":{"yes":""},"timout":"1h"}`, nil, 0, "unknown field"},
		{"no question", `{"options":{"yes":""}}`, nil, 0, `"question" is missing`},
		{"no options", `{"question":"Q"}`, nil, 0, `"options" is missing`},
		{"empty options", `{"question":"Q","options":{}}`, nil, 0, `"options" is empty`},
		{"options a list", `{"question":"Q","options":["yes","no"]}`, nil, 0, "must be an object"},
		{"meaning not a string", `{"question":"Q","options":{"yes":1}}`, nil, 0, "must be a string"},
		{"reserved option", `{"question":"Q","options":{"timed_out":""}}`, nil, 0, "reserved"},
		{"bad option name", `{"question":"Q","options":{"a b":""}}`, nil, 0, "names are"},
		{"duplicate option", `{"question":"Q","options":{"a":"","a":""}}`, nil, 0, "twice"},
		{"bad timeout", `{"question":"Q","options":{"a":""},"timeout":"soon"}`, nil, 0, "not a positive duration"},
		{"negative timeout", `{"question":"Q","options":{"a":""},"timeout":"-1h"}`, nil, 0, "not a positive duration"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			q, err := parseQuestion([]byte(tc.in))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want it to mention %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := optionNames(q.Options); strings.Join(got, ",") != strings.Join(tc.want, ",") || q.Timeout != tc.timeout {
				t.Errorf("options %v timeout %s, want %v %s", got, q.Timeout, tc.want, tc.timeout)
			}
		})
	}
}
