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
//   - Claude's machine form "Claude AI usage limit reached|<unix time>".
//
// Lines merely mentioning limits ("see the rate limit docs") do not match.
// The last notice of the log wins.
//
// # Reset time
//
// The time after "reset(s)", "until", "try again" or "available again"
// (optionally "at"): "3am", "1:10am", "3:00 PM",
// "15:00", optionally a weekday ("Mon 9am"), optionally a zone in
// parentheses or brackets ("(America/Denver)", "[UTC]"); also "in 2h 30m"
// and the unix time of the machine form. The time is read in its zone,
// else in the caller's zone, and rolled to the next day (or the named
// weekday) when already past. A notice without a readable time resets in
// an hour. Every wait is capped by Options.MaxWait.
package usagelimit

import (
	"bytes"
	"regexp"
	"strconv"
	"strings"
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

var (
	epochRe    = regexp.MustCompile(`(?i)usage limit reached\|(\d{9,})`)
	relativeRe = regexp.MustCompile(`(?i)\bresets?\s+in\s+(?:(\d+)\s*h(?:ours?|rs?)?)?\s*(?:(\d+)\s*m(?:in(?:ute)?s?)?)?`)
	clockRe    = regexp.MustCompile(`(?i)\b(?:resets?|until|try again|available again)\b(?:\s+at)?[\s:·∙•\-–—]*` +
		`(?:(mon|tue|wed|thu|fri|sat|sun)[a-z]*,?\s+)?` +
		`(?:at\s+)?(\d{1,2})(?:[:.](\d{2}))?\s*([ap])?\.?\s*(?:m\b\.?)?` +
		`(?:\s*[(\[]\s*([A-Za-z_]+(?:/[A-Za-z0-9_+\-]+)*)\s*[)\]])?`)
	weekdays = map[string]time.Weekday{"sun": time.Sunday, "mon": time.Monday, "tue": time.Tuesday, "wed": time.Wednesday,
		"thu": time.Thursday, "fri": time.Friday, "sat": time.Saturday}
)

// resetTime reads the reset time of a notice line.
func resetTime(line string, now time.Time, loc *time.Location) (time.Time, bool) {
	if m := epochRe.FindStringSubmatch(line); m != nil {
		if sec, err := strconv.ParseInt(m[1], 10, 64); err == nil {
			t := time.Unix(sec, 0)
			if t.After(now) {
				return t, true
			}
		}
		return time.Time{}, false
	}
	if m := relativeRe.FindStringSubmatch(line); m != nil && (m[1] != "" || m[2] != "") {
		h, _ := strconv.Atoi(m[1])
		mins, _ := strconv.Atoi(m[2])
		return now.Add(time.Duration(h)*time.Hour + time.Duration(mins)*time.Minute), true
	}
	m := clockRe.FindStringSubmatch(line)
	if m == nil {
		return time.Time{}, false
	}
	hour, _ := strconv.Atoi(m[2])
	minute, _ := strconv.Atoi(m[3])
	switch ampm := strings.ToLower(m[4]); {
	case ampm == "" && hour > 23, minute > 59:
		return time.Time{}, false
	case ampm != "" && (hour < 1 || hour > 12):
		return time.Time{}, false
	case ampm == "a" && hour == 12:
		hour = 0
	case ampm == "p" && hour < 12:
		hour += 12
	}
	if m[5] != "" {
		if z, err := time.LoadLocation(m[5]); err == nil {
			loc = z
		}
	}
	local := now.In(loc)
	t := time.Date(local.Year(), local.Month(), local.Day(), hour, minute, 0, 0, loc)
	if wd, ok := weekdays[strings.ToLower(m[1])]; ok {
		for t.Weekday() != wd || !t.After(now) {
			t = t.AddDate(0, 0, 1)
		}
		return t, true
	}
	if !t.After(now) {
		t = t.AddDate(0, 0, 1)
	}
	return t, true
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
