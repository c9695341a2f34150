package usagelimit

import (
	"regexp"
	"strconv"
	"strings"
	"time"
)

// warningRe matches lines that warn a limit is near rather than say it is
// reached.
var warningRe = regexp.MustCompile(`(?i)\b(?:approaching|nearing|close to|almost (?:at|reached|out of))\b|\b\d{1,3}\s*%\s*(?:of|used)\b|\bused \d{1,3}\s*%`)

const (
	monthPat = `(jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\.?`
	dayPat   = `(\d{1,2})(?:st|nd|rd|th)?`
)

var (
	epochRe    = regexp.MustCompile(`(?i)usage limit reached\|(\d{9,})`)
	relativeRe = regexp.MustCompile(`(?i)\b(?:resets?|try again|available again)\s+in\s+((?:\d+\s*[a-z]+[\s,]*(?:and\s+)?)+)`)
	unitRe     = regexp.MustCompile(`(?i)(\d+)\s*([a-z]+)`)
	clockRe    = regexp.MustCompile(`(?i)\b(?:resets?|until|try again|available again)\b(?:\s+(?:at|on))?[\s:·∙•\-–—]*` +
		// 1: weekday
		`(?:(mon|tue|wed|thu|fri|sat|sun)[a-z]*\.?,?\s+)?` +
		// 2,3: month day; 4,5: day month; 6: year; 7,8,9: ISO date
		`(?:(?:` + monthPat + `\s+` + dayPat + `|` + dayPat + `\s+` + monthPat + `)(?:,?\s+(\d{4}))?|(\d{4})-(\d{2})-(\d{2}))?` +
		`(?:,?\s*(?:at\s+)?` +
		// 10: hour, 11: minute, 12: second, 13: a or p
		`(\d{1,2})(?:[:.](\d{2})(?::(\d{2}))?)?\s*([ap])?\.?\s*(?:m\b\.?)?)?` +
		// 14: zone
		`(?:\s*[(\[]\s*([A-Za-z_]+(?:/[A-Za-z0-9_+\-]+)*)\s*[)\]])?`)
	weekdays = map[string]time.Weekday{"sun": time.Sunday, "mon": time.Monday, "tue": time.Tuesday, "wed": time.Wednesday,
		"thu": time.Thursday, "fri": time.Friday, "sat": time.Saturday}
	months = map[string]time.Month{"jan": 1, "feb": 2, "mar": 3, "apr": 4, "may": 5, "jun": 6, "jul": 7, "aug": 8,
		"sep": 9, "oct": 10, "nov": 11, "dec": 12}
)

// recentPast is how long ago a machine-form reset may lie and still be
// taken as "passed, retry now"; an older one is taken as unreadable.
const recentPast = 24 * time.Hour

// resetTime reads the reset time of a notice line.
func resetTime(line string, now time.Time, loc *time.Location) (time.Time, bool) {
	if m := epochRe.FindStringSubmatch(line); m != nil {
		if sec, err := strconv.ParseInt(m[1], 10, 64); err == nil {
			t := time.Unix(sec, 0)
			if t.After(now) {
				return t, true
			}
			if now.Sub(t) < recentPast {
				// Passed already (read after a restart, say): no wait.
				return now, true
			}
		}
		return time.Time{}, false
	}
	if m := relativeRe.FindStringSubmatch(line); m != nil {
		if d, ok := relative(m[1]); ok {
			return now.Add(d), true
		}
	}
	for _, m := range clockRe.FindAllStringSubmatch(line, -1) {
		if t, ok := clock(m, now, loc); ok {
			return t, true
		}
	}
	return time.Time{}, false
}

// relative reads "2h 30m", "4 days 2 hours 3 minutes".
func relative(s string) (time.Duration, bool) {
	var d time.Duration
	found := false
	for _, u := range unitRe.FindAllStringSubmatch(s, -1) {
		n, err := strconv.Atoi(u[1])
		if err != nil {
			return 0, false
		}
		var unit time.Duration
		switch w := strings.ToLower(u[2]); {
		case w == "d" || strings.HasPrefix(w, "day"):
			unit = 24 * time.Hour
		case w == "h" || strings.HasPrefix(w, "hour") || strings.HasPrefix(w, "hr"):
			unit = time.Hour
		case w == "m" || strings.HasPrefix(w, "min"):
			unit = time.Minute
		case w == "s" || strings.HasPrefix(w, "sec"):
			unit = time.Second
		default:
			continue
		}
		d += time.Duration(n) * unit
		found = true
	}
	return d, found
}

// clock turns one match of clockRe into a time.
func clock(m []string, now time.Time, loc *time.Location) (time.Time, bool) {
	dated := m[2] != "" || m[5] != "" || m[7] != ""
	if !dated && m[10] == "" {
		return time.Time{}, false
	}
	hour, _ := strconv.Atoi(m[10])
	minute, _ := strconv.Atoi(m[11])
	second, _ := strconv.Atoi(m[12])
	switch ampm := strings.ToLower(m[13]); {
	case ampm == "" && hour > 23, minute > 59, second > 59:
		return time.Time{}, false
	case ampm != "" && (hour < 1 || hour > 12):
		return time.Time{}, false
	case ampm == "a" && hour == 12:
		hour = 0
	case ampm == "p" && hour < 12:
		hour += 12
	}
	if m[14] != "" {
		if z, err := time.LoadLocation(m[14]); err == nil {
			loc = z
		}
	}
	local := now.In(loc)
	if dated {
		year, month, day := 0, time.Month(0), 0
		switch {
		case m[7] != "":
			year, _ = strconv.Atoi(m[7])
			mo, _ := strconv.Atoi(m[8])
			month = time.Month(mo)
			day, _ = strconv.Atoi(m[9])
		case m[2] != "":
			month = months[strings.ToLower(m[2][:3])]
			day, _ = strconv.Atoi(m[3])
		default:
			day, _ = strconv.Atoi(m[4])
			month = months[strings.ToLower(m[5][:3])]
		}
		if m[6] != "" {
			year, _ = strconv.Atoi(m[6])
		}
		if month < 1 || month > 12 || day < 1 || day > 31 {
			return time.Time{}, false
		}
		at := func(y int) time.Time { return time.Date(y, month, day, hour, minute, second, 0, loc) }
		var t time.Time
		if year != 0 {
			t = at(year)
		} else {
			// The year that puts the date nearest to now.
			t = at(local.Year())
			for _, y := range []int{local.Year() - 1, local.Year() + 1} {
				if c := at(y); absDur(c.Sub(now)) < absDur(t.Sub(now)) {
					t = c
				}
			}
		}
		if t.Day() != day { // Feb 30 and the like
			return time.Time{}, false
		}
		if t.Before(now) {
			return now, true // the reset has passed already
		}
		return t, true
	}
	t := time.Date(local.Year(), local.Month(), local.Day(), hour, minute, second, 0, loc)
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

func absDur(d time.Duration) time.Duration {
	if d < 0 {
		return -d
	}
	return d
}
