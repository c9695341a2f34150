package usagelimit

import (
	"strings"
	"testing"
	"time"
)

func TestDetect(t *testing.T) {
	berlin, _ := time.LoadLocation("Europe/Berlin")
	// 2026-11-24 14:18 in Berlin (13:18 UTC, 06:18 in Denver), a Tuesday.
	now := time.Date(2026, 11, 24, 14, 18, 0, 0, berlin)
	cases := []struct {
		name string
		log  string
		want string // reset, RFC 3339 in UTC; "fallback" for now+1h; "cap" for now+MaxWait
	}{
		{"usage limit with zone in parentheses", "Claude usage limit reached. Your limit will reset at 3pm (America/Denver).", "2026-11-24T22:00:00Z"},
		{"session limit with minutes", "You've hit your session limit · resets 1:10am", "2026-11-25T00:10:00Z"},
		{"5-hour limit", "5-hour limit reached ∙ resets 3am", "2026-11-25T02:00:00Z"},
		{"weekly limit with weekday", "Weekly limit reached · resets Mon 9am", "2026-11-30T08:00:00Z"},
		{"daily limit 24 h", "Daily limit reached, resets 15:00", "2026-11-24T14:00:00Z"},
		{"24 h time already past rolls to tomorrow", "daily limit hit; resets at 09:30", "2026-11-25T08:30:00Z"},
		{"3:00 PM with space", "Usage limit reached - resets at 3:00 PM", "2026-11-24T14:00:00Z"},
		{"p.m. with dots", "usage limit reached, resets at 11 p.m.", "2026-11-24T22:00:00Z"},
		{"12am is midnight", "session limit reached, resets 12am", "2026-11-24T23:00:00Z"},
		{"zone in brackets", "weekly limit reached; resets 8am [UTC]", "2026-11-25T08:00:00Z"},
		{"unknown zone falls back to the local zone", "usage limit reached, resets 4pm (Mars/Base)", "2026-11-24T15:00:00Z"},
		{"relative", "Session limit reached. Resets in 2h 30m", "2026-11-24T15:48:00Z"},
		{"machine form with unix time", `{"type":"result","result":"Claude AI usage limit reached|1764000000"}`, "fallback"},
		{"machine form in the future", "Claude AI usage limit reached|1795533480", "2026-11-24T15:18:00Z"},
		{"machine form passed a moment ago", "Claude AI usage limit reached|1795521600", "now"},
		{"unparseable time: one hour", "Claude usage limit reached. Your limit will reset soon.", "fallback"},
		{"cap", "usage limit reached; resets in 200h", "cap"},
		{"last notice wins", "You've hit your session limit · resets 1:10am\nretrying\n5-hour limit reached ∙ resets 3am\n", "2026-11-25T02:00:00Z"},
		{"custom pattern", "quota exhausted, try again at 6pm", "2026-11-24T17:00:00Z"},
		{"seconds after pm", "You've hit your session limit · resets 6:26:08pm", "2026-11-24T17:26:08Z"},
		{"seconds 24 h", "5-hour limit reached ∙ resets 18:26:08", "2026-11-24T17:26:08Z"},
		{"weekly with date and comma", "You've hit your weekly limit · resets Dec 1, 10:30am", "2026-12-01T09:30:00Z"},
		{"weekly with date and at and zone", "Weekly limit reached · resets Nov 27 at 10:30am (America/Denver)", "2026-11-27T17:30:00Z"},
		{"weekly with long month and bracketed zone", "Weekly limit reached · resets December 1, 10am [UTC]", "2026-12-01T10:00:00Z"},
		{"weekday and date", "weekly limit reached · resets Mon, Nov 30, 9am", "2026-11-30T08:00:00Z"},
		{"day before month", "weekly limit reached · resets 29 Nov 9:15pm", "2026-11-29T20:15:00Z"},
		{"date without time is its midnight", "weekly limit reached · resets Nov 28", "2026-11-27T23:00:00Z"},
		{"ISO date", "Weekly limit reached; resets 2026-11-26 07:45", "2026-11-26T06:45:00Z"},
		{"dated time already past: no wait", "weekly limit reached · resets Nov 24, 9am", "now"},
		{"codex try again at an ordinal date", "You've hit your usage limit. Upgrade to Pro (https://openai.com/chatgpt/pricing) or try again at Nov 29th, 2026 10:15 PM.", "2026-11-29T21:15:00Z"},
		{"codex try again in days", "You've hit your usage limit. Upgrade to Pro or try again in 1 day 2 hours 3 minutes.", "2026-11-25T15:21:00Z"},
		{"zone in parentheses UTC", "session limit reached · resets 9pm (UTC)", "2026-11-24T21:00:00Z"},
		{"zone with underscore in brackets", "session limit reached · resets 5pm [America/New_York]", "2026-11-24T22:00:00Z"},
		{"warning after the notice is not the notice", "usage limit reached, resets 3am\nApproaching usage limit · resets at 10pm", "2026-11-25T02:00:00Z"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			n, ok := Detect([]byte("some output\n"+c.log+"\n"), Options{Now: now, Location: berlin, MaxWait: 7 * 24 * time.Hour,
				Patterns: []string{`quota exhausted.*try again`}})
			if !ok {
				t.Fatalf("no notice found in %q", c.log)
			}
			switch c.want {
			case "fallback":
				if n.Parsed || !n.Reset.Equal(now.Add(Fallback)) {
					t.Errorf("reset %v parsed %v, want the one-hour fallback", n.Reset, n.Parsed)
				}
			case "now":
				if !n.Parsed || !n.Reset.Equal(now) {
					t.Errorf("reset %v parsed %v, want now (the reset has passed)", n.Reset, n.Parsed)
				}
			case "cap":
				if !n.Capped || !n.Reset.Equal(now.Add(7*24*time.Hour)) {
					t.Errorf("reset %v capped %v, want the cap", n.Reset, n.Capped)
				}
			default:
				if got := n.Reset.UTC().Format(time.RFC3339); got != c.want || !n.Parsed {
					t.Errorf("reset = %s (parsed %v), want %s", got, n.Parsed, c.want)
				}
			}
			if !strings.Contains(c.log, n.Line) {
				t.Errorf("line %q is not from the log", n.Line)
			}
		})
	}
}

// TestDateYear: a date without a year is taken in the year nearest to now,
// so a reset printed in late December for early January is next year's.
func TestDateYear(t *testing.T) {
	now := time.Date(2026, 12, 30, 22, 0, 0, 0, time.UTC)
	cases := []struct{ log, want string }{
		{"weekly limit reached · resets Jan 2, 8am (UTC)", "2027-01-02T08:00:00Z"},
		{"weekly limit reached · resets Dec 31, 8am (UTC)", "2026-12-31T08:00:00Z"},
		{"weekly limit reached · resets Jan 2, 2027 8am (UTC)", "2027-01-02T08:00:00Z"},
		{"weekly limit reached · resets Feb 30, 8am (UTC)", "2026-12-30T23:00:00Z"}, // no such day: the fallback
	}
	for _, c := range cases {
		n, ok := Detect([]byte(c.log), Options{Now: now, Location: time.UTC, MaxWait: 7 * 24 * time.Hour})
		if got := n.Reset.UTC().Format(time.RFC3339); !ok || got != c.want {
			t.Errorf("%q: reset %s (found %v), want %s", c.log, got, ok, c.want)
		}
	}
}

func TestNoNotice(t *testing.T) {
	for _, log := range []string{
		"See the rate limit docs at https://docs.example.com/limits",
		"Checking usage limits... ok (42% used)",
		"usage: limit [--reset] [--count N]",
		"weekly report: limit reached for 3 of 5 tasks",
		"error: build failed\nexit status 1",
		"quota exhausted",
		"Approaching usage limit · resets at 10pm",
		"Approaching Opus usage limit · resets 6:26:08pm",
		"You've used 90% of your weekly limit · resets Oct 9, 10:30am",
		"You're close to your session limit · resets 3am",
		"Weekly limit: 75% used · resets Mon 9am",
	} {
		if n, ok := Detect([]byte(log), Options{Patterns: []string{`quota exhausted.*try again`}}); ok {
			t.Errorf("%q matched as a usage-limit notice: %+v", log, n)
		}
	}
}

func TestSessionID(t *testing.T) {
	cases := []struct{ log, want string }{
		{"Starting\nSession ID: 3f2a9c1e-77b0-4d4e-9a4f-0c6b1d2e3f40\nworking", "3f2a9c1e-77b0-4d4e-9a4f-0c6b1d2e3f40"},
		{`{"type":"system","subtype":"init","session_id":"abc-123-def"}` + "\n" + `{"type":"result","session_id":"abc-123-def","result":"Claude AI usage limit reached|1764000000"}`, "abc-123-def"},
		{`{"session_id": "spaced-json-id"}`, "spaced-json-id"},
		{"session_id=kv_style_42", "kv_style_42"},
		{"session_id: first-one\nSession ID: second-one", "second-one"},
		{"no session here; session ids are printed elsewhere", ""},
	}
	for _, c := range cases {
		if got := SessionID([]byte(c.log)); got != c.want {
			t.Errorf("SessionID(%q) = %q, want %q", c.log, got, c.want)
		}
	}
}
