package cron

import "time"

// civil returns t's wall-clock reading as a time in UTC, so that adding
// durations to it steps through wall-clock times without zone effects.
func civil(t time.Time) time.Time {
	return time.Date(t.Year(), t.Month(), t.Day(), t.Hour(), t.Minute(), t.Second(), t.Nanosecond(), time.UTC)
}

// instant returns when the wall-clock time c (a civil time held in UTC)
// happens in loc: its first occurrence when clocks went back and it happens
// twice, and the instant clocks jumped forward when it does not happen at
// all.
func instant(c time.Time, loc *time.Location) time.Time {
	t := time.Date(c.Year(), c.Month(), c.Day(), c.Hour(), c.Minute(), 0, 0, loc)
	start, end := t.ZoneBounds()
	_, off := t.Zone()
	offsets := []int{off}
	if !start.IsZero() {
		_, o := start.Add(-time.Second).Zone()
		offsets = append(offsets, o)
	}
	if !end.IsZero() {
		_, o := end.Zone()
		offsets = append(offsets, o)
	}
	var first time.Time
	for _, o := range offsets {
		i := c.Add(-time.Duration(o) * time.Second).In(loc)
		if civil(i).Equal(c) && (first.IsZero() || i.Before(first)) {
			first = i
		}
	}
	if !first.IsZero() {
		return first
	}
	// c falls in a gap: t is on one side of it, the change on the other.
	if civil(t).After(c) {
		return start
	}
	return end
}
