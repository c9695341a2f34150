// Package cron parses cron schedules and computes when they fire, in a time
// zone, with defined behaviour across daylight-saving changes.
//
// # Syntax
//
// A schedule is five fields, minute hour day-of-month month day-of-week, each
// "*", a number, a range "a-b", a step "*/s", "a-b/s" or "a/s" (from a to the
// field's end), or a comma-separated list of those. Months and weekdays take
// English names (jan..dec, sun..sat, any case); weekday 7 is Sunday like 0;
// "?" means "*" in the day fields. As in Vixie cron, when both day fields are
// restricted a day matches when either does. Descriptors stand for common
// schedules: @yearly (@annually), @monthly, @weekly, @daily (@midnight) and
// @hourly. A schedule may start with "CRON_TZ=Zone " (or "TZ=Zone ") naming
// the IANA zone it runs in; otherwise the zone given to Parse applies.
//
// # Time zones and daylight saving
//
// A schedule names wall-clock times of its zone. Next returns instants:
//
//   - A wall-clock time that does not exist because clocks jumped forward
//     (02:30 on a spring-forward night in New York) fires once, at the
//     instant of the change (03:00 local). Several skipped times of the same
//     night fire together, once.
//   - A wall-clock time that exists twice because clocks went back (01:30
//     on a fall-back night) fires once, at its first occurrence; the
//     repeated hour fires nothing a second time.
//
// So a schedule never fires twice for one wall-clock time and never loses a
// day's fire to a clock change.
package cron

import (
	"fmt"
	"strings"
	"time"
	_ "time/tzdata" // CRON_TZ= zones must work on hosts without a zoneinfo database
)

// Schedule is a parsed cron schedule in its time zone.
type Schedule struct {
	expr string
	loc  *time.Location
	// Bit i is set when value i matches.
	minute, hour, dom, month, dow uint64
	// domAny and dowAny say the day field was "*" (or "?"): then the days
	// match on the other field alone.
	domAny, dowAny bool
}

// descriptors are the @-names and the fields they stand for.
var descriptors = map[string]string{
	"@yearly":   "0 0 1 1 *",
	"@annually": "0 0 1 1 *",
	"@monthly":  "0 0 1 * *",
	"@weekly":   "0 0 * * 0",
	"@daily":    "0 0 * * *",
	"@midnight": "0 0 * * *",
	"@hourly":   "0 * * * *",
}

// Parse reads a schedule. A "CRON_TZ=Zone" prefix sets its zone; without one
// it runs in loc (time.Local when nil). Errors say which field is wrong and
// how to fix it.
func Parse(expr string, loc *time.Location) (*Schedule, error) {
	if loc == nil {
		loc = time.Local
	}
	s := &Schedule{expr: strings.TrimSpace(expr), loc: loc}
	rest := s.expr
	for _, prefix := range []string{"CRON_TZ=", "TZ="} {
		if tz, ok := strings.CutPrefix(rest, prefix); ok {
			name, fields, _ := strings.Cut(tz, " ")
			z, err := time.LoadLocation(name)
			if err != nil || name == "" {
				return nil, fmt.Errorf("%s%s: unknown time zone; use an IANA name such as UTC or Europe/Berlin", prefix, name)
			}
			s.loc, rest = z, strings.TrimSpace(fields)
			break
		}
	}
	if rest == "" {
		return nil, fmt.Errorf("empty schedule; write five fields (minute hour day-of-month month day-of-week) such as \"0 9 * * 1-5\", or a descriptor such as @daily")
	}
	if strings.HasPrefix(rest, "@") {
		f, ok := descriptors[strings.ToLower(rest)]
		if !ok {
			return nil, fmt.Errorf("unknown descriptor %q; use @yearly, @annually, @monthly, @weekly, @daily, @midnight or @hourly", rest)
		}
		rest = f
	}
	fields := strings.Fields(rest)
	if len(fields) != 5 {
		return nil, fmt.Errorf("%q has %d fields; a schedule has five: minute hour day-of-month month day-of-week (e.g. \"0 9 * * 1-5\")", rest, len(fields))
	}
	var err error
	bits := []*uint64{&s.minute, &s.hour, &s.dom, &s.month, &s.dow}
	for i, f := range fields {
		if *bits[i], err = fieldSpecs[i].parse(f); err != nil {
			return nil, err
		}
	}
	s.domAny = isAny(fields[2])
	s.dowAny = isAny(fields[4])
	if s.dow&(1<<7) != 0 { // 7 is Sunday too
		s.dow = s.dow&^(1<<7) | 1
	}
	if s.Next(time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)).IsZero() {
		return nil, fmt.Errorf("%q never fires (no such day, e.g. 30 February); check the day-of-month and month fields", rest)
	}
	return s, nil
}

func isAny(f string) bool { return f == "?" || strings.HasPrefix(f, "*") }

// String is the schedule as written (with its CRON_TZ= prefix, if any).
func (s *Schedule) String() string { return s.expr }

// Location is the zone the schedule runs in.
func (s *Schedule) Location() *time.Location { return s.loc }

// searchYears bounds the search for the next fire; every valid schedule
// fires within it (29 February does within eight years).
const searchYears = 9

// Next returns the first fire strictly after after, or the zero time when
// there is none within searchYears years. See the package documentation for
// daylight-saving changes.
func (s *Schedule) Next(after time.Time) time.Time {
	a := after.In(s.loc)
	c := civil(a).Truncate(time.Minute).Add(time.Minute)
	limit := c.AddDate(searchYears, 0, 0)
	for c.Before(limit) {
		c = s.nextCivil(c, limit)
		if c.IsZero() {
			return time.Time{}
		}
		if t := instant(c, s.loc); t.After(after) {
			return t
		}
		c = c.Add(time.Minute)
	}
	return time.Time{}
}

// Latest returns the last fire in (after, until], or the zero time when none
// falls in that span. It looks back in widening windows, so that a schedule
// firing every minute costs at most an hour of steps however long the span.
func (s *Schedule) Latest(after, until time.Time) time.Time {
	for _, back := range []time.Duration{time.Hour, 24 * time.Hour, 32 * 24 * time.Hour, 367 * 24 * time.Hour, searchYears * 366 * 24 * time.Hour} {
		from := until.Add(-back)
		if from.Before(after) {
			from = after
		}
		var last time.Time
		for t := s.Next(from); !t.IsZero() && !t.After(until); t = s.Next(t) {
			last = t
		}
		if !last.IsZero() || !from.After(after) {
			return last
		}
	}
	return time.Time{}
}

// nextCivil returns the first wall-clock time at or after c (a civil time
// held in UTC) matching the schedule, or zero when none is before limit.
func (s *Schedule) nextCivil(c, limit time.Time) time.Time {
	for c.Before(limit) {
		switch {
		case s.month&(1<<uint(c.Month())) == 0:
			c = time.Date(c.Year(), c.Month()+1, 1, 0, 0, 0, 0, time.UTC)
		case !s.dayMatches(c):
			c = time.Date(c.Year(), c.Month(), c.Day()+1, 0, 0, 0, 0, time.UTC)
		case s.hour&(1<<uint(c.Hour())) == 0:
			c = c.Truncate(time.Hour).Add(time.Hour)
		case s.minute&(1<<uint(c.Minute())) == 0:
			c = c.Add(time.Minute)
		default:
			return c
		}
	}
	return time.Time{}
}

func (s *Schedule) dayMatches(c time.Time) bool {
	dom := s.dom&(1<<uint(c.Day())) != 0
	dow := s.dow&(1<<uint(c.Weekday())) != 0
	if s.domAny || s.dowAny {
		return dom && dow
	}
	return dom || dow
}
