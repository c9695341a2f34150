package cron

import (
	"strings"
	"testing"
	"time"
)

func mustLoc(t *testing.T, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	if err != nil {
		t.Fatal(err)
	}
	return loc
}

// fires lists the first n fires after from, as RFC 3339 in the schedule's zone.
func fires(s *Schedule, from time.Time, n int) []string {
	var out []string
	for t := from; len(out) < n; {
		t = s.Next(t)
		if t.IsZero() {
			break
		}
		out = append(out, t.In(s.Location()).Format(time.RFC3339))
	}
	return out
}

func TestNext(t *testing.T) {
	utc := time.UTC
	ny := mustLoc(t, "America/New_York")
	berlin := mustLoc(t, "Europe/Berlin")
	lordHowe := mustLoc(t, "Australia/Lord_Howe")
	cases := []struct {
		name string
		expr string
		loc  *time.Location
		from string // RFC 3339
		want []string
	}{
		{"every minute", "* * * * *", utc, "2026-01-01T10:00:30Z",
			[]string{"2026-01-01T10:01:00Z", "2026-01-01T10:02:00Z", "2026-01-01T10:03:00Z"}},
		{"on a fire, the next one", "*/20 * * * *", utc, "2026-01-01T10:20:00Z",
			[]string{"2026-01-01T10:40:00Z", "2026-01-01T11:00:00Z"}},
		{"weekdays at nine", "0 9 * * 1-5", utc, "2026-11-20T09:00:00Z", // a Friday
			[]string{"2026-11-23T09:00:00Z", "2026-11-24T09:00:00Z"}},
		{"names", "0 0 1 jan,JUL *", utc, "2026-02-01T00:00:00Z",
			[]string{"2026-07-01T00:00:00Z", "2027-01-01T00:00:00Z"}},
		{"weekday 7 is sunday", "0 12 * * 7", utc, "2026-11-24T00:00:00Z",
			[]string{"2026-11-29T12:00:00Z", "2026-12-06T12:00:00Z"}},
		{"day fields OR when both restricted", "0 0 13 * 5", utc, "2026-02-01T00:00:00Z",
			[]string{"2026-02-06T00:00:00Z", "2026-02-13T00:00:00Z", "2026-02-20T00:00:00Z"}},
		{"day-of-month step with star ANDs", "0 0 */10 * 1", utc, "2026-06-01T00:00:00Z",
			[]string{"2026-08-31T00:00:00Z", "2026-09-21T00:00:00Z"}},
		{"29 February", "0 0 29 2 *", utc, "2026-01-01T00:00:00Z",
			[]string{"2028-02-29T00:00:00Z", "2032-02-29T00:00:00Z"}},
		{"range with step", "5-20/5 3 * * *", utc, "2026-01-01T00:00:00Z",
			[]string{"2026-01-01T03:05:00Z", "2026-01-01T03:10:00Z", "2026-01-01T03:15:00Z", "2026-01-01T03:20:00Z", "2026-01-02T03:05:00Z"}},
		{"start with step", "50/5 * * * *", utc, "2026-01-01T00:00:00Z",
			[]string{"2026-01-01T00:50:00Z", "2026-01-01T00:55:00Z", "2026-01-01T01:50:00Z"}},
		{"@hourly", "@hourly", utc, "2026-01-01T00:00:00Z", []string{"2026-01-01T01:00:00Z", "2026-01-01T02:00:00Z"}},
		{"@daily", "@daily", utc, "2026-01-01T00:00:00Z", []string{"2026-01-02T00:00:00Z"}},
		{"@midnight", "@MIDNIGHT", utc, "2026-01-01T00:00:00Z", []string{"2026-01-02T00:00:00Z"}},
		{"@weekly", "@weekly", utc, "2026-11-24T00:00:00Z", []string{"2026-11-29T00:00:00Z", "2026-12-06T00:00:00Z"}},
		{"@monthly", "@monthly", utc, "2026-11-24T00:00:00Z", []string{"2026-12-01T00:00:00Z", "2027-01-01T00:00:00Z"}},
		{"@yearly", "@yearly", utc, "2026-11-24T00:00:00Z", []string{"2027-01-01T00:00:00Z"}},
		{"@annually", "@annually", utc, "2026-11-24T00:00:00Z", []string{"2027-01-01T00:00:00Z"}},
		{"zone of the caller", "0 9 * * *", ny, "2026-11-24T00:00:00Z", []string{"2026-11-24T09:00:00-05:00"}},
		{"CRON_TZ prefix wins", "CRON_TZ=Asia/Tokyo 0 9 * * *", ny, "2026-11-23T23:00:00Z", []string{"2026-11-24T09:00:00+09:00", "2026-11-25T09:00:00+09:00"}},
		{"TZ prefix", "TZ=Europe/Berlin @daily", utc, "2026-11-24T00:00:00Z", []string{"2026-11-25T00:00:00+01:00"}},

		// Spring forward, New York 2026-03-08 02:00 EST -> 03:00 EDT.
		{"skipped time fires once at the change", "30 2 * * *", ny, "2026-03-07T12:00:00-05:00",
			[]string{"2026-03-08T03:00:00-04:00", "2026-03-09T02:30:00-04:00"}},
		{"skipped quarter hours fire together once", "*/15 * * * *", ny, "2026-03-08T01:40:00-05:00",
			[]string{"2026-03-08T01:45:00-05:00", "2026-03-08T03:00:00-04:00", "2026-03-08T03:15:00-04:00"}},
		{"hourly across spring forward", "@hourly", ny, "2026-03-08T00:30:00-05:00",
			[]string{"2026-03-08T01:00:00-05:00", "2026-03-08T03:00:00-04:00", "2026-03-08T04:00:00-04:00"}},
		{"schedule after the gap is untouched", "30 3 * * *", ny, "2026-03-08T00:00:00-05:00",
			[]string{"2026-03-08T03:30:00-04:00"}},
		// Fall back, New York 2026-11-01 02:00 EDT -> 01:00 EST.
		{"repeated time fires once", "30 1 * * *", ny, "2026-10-31T12:00:00-04:00",
			[]string{"2026-11-01T01:30:00-04:00", "2026-11-02T01:30:00-05:00"}},
		{"hourly skips the repeated hour", "0 * * * *", ny, "2026-10-31T23:30:00-04:00",
			[]string{"2026-11-01T00:00:00-04:00", "2026-11-01T01:00:00-04:00", "2026-11-01T02:00:00-05:00"}},
		{"from inside the repeated hour", "*/30 * * * *", ny, "2026-11-01T01:10:00-05:00",
			[]string{"2026-11-01T02:00:00-05:00", "2026-11-01T02:30:00-05:00"}},
		// Berlin 2026-03-29 02:00 CET -> 03:00 CEST and 2026-10-25 03:00 CEST -> 02:00 CET.
		{"Berlin spring forward", "15 2 * * *", berlin, "2026-03-28T12:00:00+01:00",
			[]string{"2026-03-29T03:00:00+02:00", "2026-03-30T02:15:00+02:00"}},
		{"Berlin fall back", "15 2 * * *", berlin, "2026-10-24T12:00:00+02:00",
			[]string{"2026-10-25T02:15:00+02:00", "2026-10-26T02:15:00+01:00"}},
		// Lord Howe moves by half an hour: 2026-10-04 02:00 -> 02:30.
		{"half-hour shift", "10 2 * * *", lordHowe, "2026-10-03T12:00:00+10:30",
			[]string{"2026-10-04T02:30:00+11:00", "2026-10-05T02:10:00+11:00"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, err := Parse(c.expr, c.loc)
			if err != nil {
				t.Fatal(err)
			}
			from, err := time.Parse(time.RFC3339, c.from)
			if err != nil {
				t.Fatal(err)
			}
			got := fires(s, from, len(c.want))
			if strings.Join(got, " ") != strings.Join(c.want, " ") {
				t.Errorf("%s from %s:\n got %v\nwant %v", c.expr, c.from, got, c.want)
			}
		})
	}
}

// TestDSTDayCounts walks whole days across both changes and checks that a
// per-minute schedule fires once per existing or skipped minute group.
func TestDSTDayCounts(t *testing.T) {
	ny := mustLoc(t, "America/New_York")
	count := func(expr string, day time.Time) int {
		s, err := Parse(expr, ny)
		if err != nil {
			t.Fatal(err)
		}
		end := day.AddDate(0, 0, 1)
		n := 0
		seen := map[time.Time]bool{}
		for f := s.Next(day.Add(-time.Second)); !f.IsZero() && f.Before(end); f = s.Next(f) {
			if seen[f] {
				t.Fatalf("%s fired twice at %s", expr, f)
			}
			seen[f] = true
			n++
		}
		return n
	}
	spring := time.Date(2026, 3, 8, 0, 0, 0, 0, ny)
	fall := time.Date(2026, 11, 1, 0, 0, 0, 0, ny)
	// 23-hour day: 1380 minutes exist; the 60 skipped ones fire together once.
	// Minutes 02:00-02:59 collapse into 03:00, itself an existing minute.
	if n := count("* * * * *", spring); n != 23*60 {
		t.Errorf("spring day: %d fires of * * * * *, want %d", n, 23*60)
	}
	// 25-hour day: the repeated hour fires nothing a second time.
	if n := count("* * * * *", fall); n != 24*60 {
		t.Errorf("fall day: %d fires of * * * * *, want %d", n, 24*60)
	}
	if n := count("@hourly", spring); n != 23 {
		t.Errorf("spring day: %d hourly fires, want 23", n)
	}
	if n := count("@hourly", fall); n != 24 {
		t.Errorf("fall day: %d hourly fires, want 24", n)
	}
	for _, day := range []time.Time{spring, fall} {
		if n := count("30 2 * * *", day); n != 1 {
			t.Errorf("%s: 02:30 fired %d times, want once", day.Format(time.DateOnly), n)
		}
		if n := count("30 1 * * *", day); n != 1 {
			t.Errorf("%s: 01:30 fired %d times, want once", day.Format(time.DateOnly), n)
		}
	}
}

func TestLatest(t *testing.T) {
	s, err := Parse("0 9 * * *", time.UTC)
	if err != nil {
		t.Fatal(err)
	}
	at := func(v string) time.Time { x, _ := time.Parse(time.RFC3339, v); return x }
	cases := []struct{ after, until, want string }{
		{"2026-11-20T09:00:00Z", "2026-11-24T10:00:00Z", "2026-11-24T09:00:00Z"},
		{"2026-11-20T09:00:00Z", "2026-11-24T09:00:00Z", "2026-11-24T09:00:00Z"},
		{"2026-11-20T09:00:00Z", "2026-11-20T20:00:00Z", ""},
		{"2020-01-01T00:00:00Z", "2026-11-24T08:00:00Z", "2026-11-23T09:00:00Z"},
	}
	for _, c := range cases {
		got := s.Latest(at(c.after), at(c.until))
		want := time.Time{}
		if c.want != "" {
			want = at(c.want)
		}
		if !got.Equal(want) {
			t.Errorf("Latest(%s, %s) = %v, want %v", c.after, c.until, got, want)
		}
	}
	every, _ := Parse("* * * * *", time.UTC)
	if got := every.Latest(at("2020-01-01T00:00:00Z"), at("2026-11-24T08:00:30Z")); !got.Equal(at("2026-11-24T08:00:00Z")) {
		t.Errorf("every minute over years: %v", got)
	}
}

func TestParseErrors(t *testing.T) {
	cases := []struct{ expr, want string }{
		{"", "empty schedule"},
		{"* * * *", "has 4 fields"},
		{"* * * * * *", "has 6 fields"},
		{"60 * * * *", "minute field \"60\": 60 is out of range; use 0 to 59"},
		{"* 24 * * *", "hour field"},
		{"* * 0 * *", "day-of-month field \"0\": 0 is out of range"},
		{"* * * 13 *", "month field"},
		{"* * * foo *", "neither a number from 1 to 12 nor a name"},
		{"* * * * 8", "day-of-week field"},
		{"*/0 * * * *", "step \"0\" must be a positive number"},
		{"5-1 * * * *", "runs backwards"},
		{"1,,2 * * * *", "empty value"},
		{"0 0 30 2 *", "never fires"},
		{"@reboot", "unknown descriptor"},
		{"CRON_TZ=Mars/Olympus 0 9 * * *", "unknown time zone"},
		{"CRON_TZ=UTC", "empty schedule"},
	}
	for _, c := range cases {
		_, err := Parse(c.expr, time.UTC)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Parse(%q) = %v, want an error containing %q", c.expr, err, c.want)
		}
	}
}

func TestParseFile(t *testing.T) {
	ny := mustLoc(t, "America/New_York")
	e, err := ParseFile("daily-review.md", []byte("---\ncron: \"0 9 * * 1-5\"\nroutine: daily-review\ncatch_up: true\nteam: core\n---\nRun the morning review.\n"), ny)
	if err != nil {
		t.Fatal(err)
	}
	if e.Stem != "daily-review" || e.Routine != "daily-review" || !e.CatchUp || e.Schedule.String() != "0 9 * * 1-5" || e.Schedule.Location() != ny {
		t.Errorf("entry = %+v", e)
	}
	if _, ok := e.Message.Get("cron"); ok {
		t.Error("the message keeps cron:")
	}
	if _, ok := e.Message.Get("catch_up"); ok {
		t.Error("the message keeps catch_up:")
	}
	if got := string(e.Message.Render()); got != "---\nroutine: daily-review\nteam: core\n---\nRun the morning review.\n" {
		t.Errorf("message = %q", got)
	}

	bad := []struct{ name, data, want string }{
		{"bad.md", "---\nroutine: x\ncron: \"61 * * * *\"\n---\nbody\n", "bad.md:3: cron: minute field"},
		{"none.md", "---\nroutine: x\n---\nbody\n", "none.md:1: no \"cron:\" field"},
		{"plain.md", "just a body\n", "plain.md:1: no \"cron:\" field"},
		{"yaml.md", "---\ncron: [\n---\n", "yaml.md:"},
		{"catch.md", "---\ncron: \"@daily\"\n\ncatch_up: maybe\n---\n", "catch.md:4: catch_up: \"maybe\" is not true or false"},
		{"unclosed.md", "---\ncron: \"@daily\"\n", "unclosed.md:1:"},
	}
	for _, b := range bad {
		_, err := ParseFile(b.name, []byte(b.data), ny)
		if err == nil || !strings.HasPrefix(err.Error(), b.want) {
			t.Errorf("ParseFile(%s) = %v, want prefix %q", b.name, err, b.want)
		}
	}
}
