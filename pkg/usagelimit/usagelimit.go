// Package usagelimit recognises an AI tool's "usage limit reached" notice
// in a routine's log, works out when the limit resets, and finds the
// session id the tool printed, so that decree can wait for the reset and
// let the routine resume that session.
//
// # Notices
//
// A notice is one log line matching a built-in pattern or one of the
// caller's (config usage_limit.patterns):
//
//   - "usage limit" followed by "reset" ("Claude usage limit reached. Your
//     limit will reset at 3pm (America/Denver)");
//   - a session, 5-hour, hourly, daily or weekly limit followed by
//     "reset(s)" ("You've hit your session limit · resets 1:10am",
//     "5-hour limit reached ∙ resets 3am", "Weekly limit reached · resets
//     Mon 9am");
//   - Claude's machine form "Claude AI usage limit reached|<unix time>";
//   - a usage limit hit or reached, then "try again" ("You've hit your
//     usage limit. ... try again at Dec 29th, 2025 10:15 PM").
//
// Lines merely mentioning limits ("see the rate limit docs") do not match,
// and neither do warnings that a limit is near ("Approaching usage limit ·
// resets at 10pm", "You've used 90% of your weekly limit"): the tool goes on
// working after those, so an attempt that fails after one failed for its
// own reasons. The last notice of the log wins.
//
// # Reset time
//
// The time after "reset(s)", "until", "try again" or "available again"
// (optionally "at" or "on"): a clock time "3am", "1:10am", "6:26:08pm",
// "3:00 PM", "15:00"; optionally before it a weekday ("Mon 9am") or a date
// ("Oct 9, 10:30am", "Oct 9 at 10:30am", "Dec 29th, 2025 10:15 PM", "9 Oct",
// "2026-10-09 10:30"; a date alone means its midnight); optionally after it
// a zone in parentheses or brackets ("(America/Denver)", "[UTC]"). Also
// "in 2h 30m", "in 4 days 2 hours 3 minutes" and the unix time of the
// machine form. The time is read in its zone, else in the caller's zone. A
// clock time alone is rolled to the next day (a weekday to that day) when
// already past; a date without a year is taken in the year that puts it
// nearest to now; a dated time already past means the limit has reset (no
// wait). A notice without a readable time resets in an hour. Every wait is
// capped by Options.MaxWait.
package usagelimit

import (
	"bytes"
	"regexp"
	"time"
)

// Notice is a usage-limit notice found in a log.
type Notice struct {
	// Line is the log line (trimmed, at most 300 bytes).
	Line string
	// Reset is when to retry.
	Reset time.Time
	// Parsed says Reset came from the notice; false means the fallback
	// (an hour from now).
	Parsed bool
	// Capped says Reset was cut to Options.MaxWait.
	Capped bool
}

// Options tune Detect.
type Options struct {
	// Now is the current time (time.Now() when zero).
	Now time.Time
	// Location reads times without a zone (time.Local when nil).
	Location *time.Location
	// Patterns are extra regular expressions, matched case-insensitively
	// per line. Invalid ones are ignored (config validates them).
	Patterns []string
	// MaxWait caps the wait (24h when zero).
	MaxWait time.Duration
}

// Fallback is the wait when a notice names no readable reset time.
const Fallback = time.Hour

var builtin = []*regexp.Regexp{
	regexp.MustCompile(`(?i)\busage limit\b.*\breset`),
	regexp.MustCompile(`(?i)\b(?:session|5-hour|five-hour|hourly|daily|weekly|opus|sonnet)\s+limit\b.*\bresets?\b`),
	regexp.MustCompile(`(?i)\busage limit reached\|\d{9,}`),
	regexp.MustCompile(`(?i)\b(?:hit|reached)\b.*\busage limit\b.*\b(?:try again|available again)\b`),
}

// Detect returns the last usage-limit notice in log, if any.
func Detect(log []byte, opts Options) (Notice, bool) {
	if opts.Now.IsZero() {
		opts.Now = time.Now()
	}
	if opts.Location == nil {
		opts.Location = time.Local
	}
	if opts.MaxWait <= 0 {
		opts.MaxWait = 24 * time.Hour
	}
	patterns := builtin
	for _, p := range opts.Patterns {
		if re, err := regexp.Compile("(?i)" + p); err == nil {
			patterns = append(patterns[:len(patterns):len(patterns)], re)
		}
	}
	lines := bytes.Split(log, []byte("\n"))
	for i := len(lines) - 1; i >= 0; i-- {
		line := string(bytes.TrimSpace(lines[i]))
		if warningRe.MatchString(line) {
			continue
		}
		for _, re := range patterns {
			if re.MatchString(line) {
				return notice(line, opts), true
			}
		}
	}
	return Notice{}, false
}

func notice(line string, opts Options) Notice {
	n := Notice{Line: line}
	if len(n.Line) > 300 {
		n.Line = n.Line[:300]
	}
	n.Reset, n.Parsed = resetTime(line, opts.Now, opts.Location)
	if !n.Parsed {
		n.Reset = opts.Now.Add(Fallback)
	}
	if n.Reset.Sub(opts.Now) > opts.MaxWait {
		n.Reset, n.Capped = opts.Now.Add(opts.MaxWait), true
	}
	return n
}

var sessionRes = []*regexp.Regexp{
	regexp.MustCompile(`(?i)\bsession[ _]id\b["']?\s*[:=]\s*["']?([A-Za-z0-9][A-Za-z0-9_.:\-]{3,127})`),
}

// SessionID returns the last session id the log names: "Session ID: <id>",
// "session_id: <id>", "session_id=<id>" or a JSON "session_id":"<id>".
func SessionID(log []byte) string {
	id := ""
	for _, re := range sessionRes {
		for _, m := range re.FindAllSubmatch(log, -1) {
			id = string(m[1])
		}
	}
	return id
}
