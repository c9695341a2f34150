package crontab

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/decreehq/decree/controller/events"
	"github.com/decreehq/decree/controller/store"
	"github.com/decreehq/decree/pkg/config"
	"github.com/decreehq/decree/pkg/message"
)

// fixture is a project with a fake clock.
type fixture struct {
	t     *testing.T
	root  string
	st    *store.Store
	cfg   *config.Config
	now   time.Time
	log   *bytes.Buffer
	wakes int
	// warnings are the texts of the warning events emitted.
	warnings []string
}

func newFixture(t *testing.T, zone string) *fixture {
	t.Helper()
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, ".decree", Dir), 0o755); err != nil {
		t.Fatal(err)
	}
	f := &fixture{t: t, root: root, cfg: config.Default(), log: &bytes.Buffer{}}
	f.cfg.TimeZone = zone
	st, err := store.Open(root, store.Options{Now: func() time.Time { return f.now }})
	if err != nil {
		t.Fatal(err)
	}
	f.st = st
	return f
}

// scheduler returns a new scheduler on the project, as a (re)started
// controller would make one.
func (f *fixture) scheduler() *Scheduler {
	f.t.Helper()
	s, err := New(Options{Store: f.st, Config: func() (*config.Config, error) { return f.cfg, nil },
		Logger: slog.New(slog.NewTextHandler(f.log, nil)), Now: func() time.Time { return f.now }, Wake: func() { f.wakes++ },
		Emit: func(ev *events.Event) {
			if ev.Kind == events.Warning {
				f.warnings = append(f.warnings, ev.Text)
			}
		}})
	if err != nil {
		f.t.Fatal(err)
	}
	return s
}

func (f *fixture) at(s string) {
	f.t.Helper()
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		f.t.Fatal(err)
	}
	f.now = t
}

func (f *fixture) write(name, content string) {
	f.t.Helper()
	if err := os.WriteFile(filepath.Join(f.root, ".decree", Dir, name), []byte(content), 0o644); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) tick(s *Scheduler) {
	f.t.Helper()
	if err := s.Tick(context.Background()); err != nil {
		f.t.Fatal(err)
	}
}

// inbox lists the inbox files.
func (f *fixture) inbox() []string {
	f.t.Helper()
	es, err := f.st.ListInbox()
	if err != nil {
		f.t.Fatal(err)
	}
	var out []string
	for _, e := range es {
		out = append(out, e.File)
	}
	return out
}

// finish moves every inbox message to done/, as the loop does.
func (f *fixture) finish() {
	f.t.Helper()
	for _, name := range f.inbox() {
		if _, err := f.st.MarkDone(name); err != nil {
			f.t.Fatal(err)
		}
	}
}

func expect(t *testing.T, what string, got []string, want ...string) {
	t.Helper()
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("%s: got %v, want %v", what, got, want)
	}
}

func TestFireCreatesInboxMessage(t *testing.T) {
	f := newFixture(t, "America/New_York")
	f.write("daily-review.md", "---\ncron: \"0 9 * * *\"\nroutine: review\ncatch_up: false\nteam: core\n---\nRun the morning review.\n")
	s := f.scheduler()
	f.at("2026-11-24T13:59:00Z") // 08:59 in New York
	f.tick(s)
	expect(t, "before 09:00", f.inbox())
	f.at("2026-11-24T14:00:01Z")
	f.tick(s)
	expect(t, "at 09:00 New York", f.inbox(), "daily-review-20261124-0900.md")
	data, err := os.ReadFile(filepath.Join(f.root, ".decree", "inbox", "daily-review-20261124-0900.md"))
	if err != nil {
		t.Fatal(err)
	}
	m, err := message.Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := m.Get("cron"); ok {
		t.Error("message keeps cron:")
	}
	if _, ok := m.Get("catch_up"); ok {
		t.Error("message keeps catch_up:")
	}
	for k, want := range map[string]string{"trigger": "cron:daily-review", "routine": "review", "team": "core"} {
		if got := m.GetString(k); got != want {
			t.Errorf("%s = %q, want %q", k, got, want)
		}
	}
	if string(m.Body) != "Run the morning review.\n" || m.Chain() == "" {
		t.Errorf("body %q chain %q", m.Body, m.Chain())
	}
	if f.wakes != 1 {
		t.Errorf("loop woken %d times, want 1", f.wakes)
	}
	f.tick(s)
	expect(t, "second tick of the same minute", f.inbox(), "daily-review-20261124-0900.md")
}

func TestUTCIsNotAssumed(t *testing.T) {
	f := newFixture(t, "Asia/Tokyo")
	f.write("a.md", "---\ncron: \"0 9 * * *\"\n---\nx\n")
	f.write("b.md", "---\ncron: \"CRON_TZ=UTC 0 9 * * *\"\n---\ny\n")
	s := f.scheduler()
	f.at("2026-11-23T23:59:00Z")
	f.tick(s)
	f.at("2026-11-24T00:00:02Z") // 09:00 in Tokyo
	f.tick(s)
	expect(t, "09:00 Tokyo", f.inbox(), "a-20261124-0900.md")
	f.at("2026-11-24T09:00:02Z")
	f.tick(s)
	expect(t, "09:00 UTC", f.inbox(), "a-20261124-0900.md", "b-20261124-0900.md")
}

func TestSkipWhilePreviousQueued(t *testing.T) {
	f := newFixture(t, "UTC")
	f.write("sync.md", "---\ncron: \"* * * * *\"\n---\nsync\n")
	s := f.scheduler()
	f.at("2026-11-24T10:00:30Z")
	f.tick(s)
	f.at("2026-11-24T10:01:00Z")
	f.tick(s)
	expect(t, "first fire", f.inbox(), "sync-20261124-1001.md")
	f.at("2026-11-24T10:02:00Z")
	f.tick(s)
	expect(t, "fire while queued", f.inbox(), "sync-20261124-1001.md")
	if !strings.Contains(f.log.String(), "skipped: its previous message sync-20261124-1001.md is still queued or running") {
		t.Errorf("skip not logged:\n%s", f.log)
	}
	f.finish()
	f.at("2026-11-24T10:02:30Z")
	f.tick(s)
	expect(t, "skipped fire is not made up later", f.inbox())
	f.at("2026-11-24T10:03:00Z")
	f.tick(s)
	expect(t, "next fire after the previous finished", f.inbox(), "sync-20261124-1003.md")
}

func TestRestartNeverDoubleFires(t *testing.T) {
	f := newFixture(t, "UTC")
	f.write("sync.md", "---\ncron: \"*/5 * * * *\"\n---\nsync\n")
	f.at("2026-11-24T10:04:00Z")
	f.tick(f.scheduler())
	f.at("2026-11-24T10:05:00Z")
	f.tick(f.scheduler())
	expect(t, "fire", f.inbox(), "sync-20261124-1005.md")
	f.finish()
	// A restart within the same minute: a new scheduler reads the record.
	f.at("2026-11-24T10:05:40Z")
	f.tick(f.scheduler())
	expect(t, "after restart in the same minute", f.inbox())

	// A crash after the fire was recorded but before its message was
	// written: the next controller writes it, once.
	rec, err := loadState(filepath.Join(f.st.Dir(), StateFile))
	if err != nil {
		t.Fatal(err)
	}
	fire, _ := time.Parse(time.RFC3339, "2026-11-24T10:10:00Z")
	rec.Files["sync.md"].LastFire = fire
	rec.Files["sync.md"].Pending = "sync-20261124-1010"
	rec.Files["sync.md"].PendingFire = fire
	if err := rec.save(filepath.Join(f.st.Dir(), StateFile)); err != nil {
		t.Fatal(err)
	}
	f.at("2026-11-24T10:10:20Z")
	f.tick(f.scheduler())
	expect(t, "interrupted fire finished", f.inbox(), "sync-20261124-1010.md")
	f.tick(f.scheduler())
	expect(t, "and not repeated", f.inbox(), "sync-20261124-1010.md")

	// A crash after the message was written but before the record said so.
	f.finish()
	rec.Files["sync.md"].Pending = "sync-20261124-1010"
	if err := rec.save(filepath.Join(f.st.Dir(), StateFile)); err != nil {
		t.Fatal(err)
	}
	f.tick(f.scheduler())
	expect(t, "message already written (now in done/)", f.inbox())
}

func TestDowntimeAndCatchUp(t *testing.T) {
	for _, c := range []struct {
		name    string
		catchUp string
		want    []string
	}{
		{"missed fires are passed over", "", nil},
		{"catch_up runs the latest missed fire once", "catch_up: true\n", []string{"hourly-20261124-1200.md"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t, "UTC")
			f.write("hourly.md", "---\ncron: \"@hourly\"\n"+c.catchUp+"---\nwork\n")
			f.at("2026-11-24T08:30:00Z")
			f.tick(f.scheduler())
			f.at("2026-11-24T09:00:00Z")
			f.tick(f.scheduler())
			expect(t, "fire before downtime", f.inbox(), "hourly-20261124-0900.md")
			f.finish()
			// Down from 09:00:10 to 12:30: fires at 10, 11 and 12 missed.
			f.at("2026-11-24T12:30:00Z")
			s := f.scheduler()
			f.tick(s)
			expect(t, "after downtime", f.inbox(), c.want...)
			f.at("2026-11-24T12:30:05Z")
			f.tick(s)
			expect(t, "a tick later", f.inbox(), c.want...)
			f.finish()
			f.at("2026-11-24T13:00:00Z")
			f.tick(s)
			expect(t, "next regular fire", f.inbox(), "hourly-20261124-1300.md")
		})
	}
}

// TestMissedFiresReported: every fire passed over after downtime is logged
// and recorded as a warning event, also the minute before a fire that
// still runs, and nothing is reported when none was missed.
func TestMissedFiresReported(t *testing.T) {
	for _, c := range []struct {
		name     string
		file     string
		down, up string // the last tick before the downtime, the first after
		want     string // the warning, "" for none
		inbox    []string
	}{
		{"every minute, down two minutes: the skipped minute is reported", "---\ncron: \"* * * * *\"\n---\nx\n",
			"2026-11-24T09:00:10Z", "2026-11-24T09:02:30Z",
			"cron:tick missed 1 fire at 2026-11-24 09:01 UTC while the controller was down; the latest one runs",
			[]string{"tick-20261124-0902.md"}},
		{"every minute, no downtime", "---\ncron: \"* * * * *\"\n---\nx\n",
			"2026-11-24T09:00:10Z", "2026-11-24T09:01:10Z", "", []string{"tick-20261124-0901.md"}},
		{"hourly without catch_up: all three", "---\ncron: \"@hourly\"\n---\nx\n",
			"2026-11-24T09:00:10Z", "2026-11-24T12:30:00Z",
			"cron:tick missed 3 fires from 2026-11-24 10:00 UTC to 2026-11-24 12:00 UTC while the controller was down; add catch_up: true to the file to run one after downtime",
			nil},
		{"hourly with catch_up: the two before the one that runs", "---\ncron: \"@hourly\"\ncatch_up: true\n---\nx\n",
			"2026-11-24T09:00:10Z", "2026-11-24T12:30:00Z",
			"cron:tick missed 2 fires from 2026-11-24 10:00 UTC to 2026-11-24 11:00 UTC while the controller was down; catch_up runs only the latest",
			[]string{"tick-20261124-1200.md"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t, "UTC")
			f.write("tick.md", c.file)
			f.at("2026-11-24T08:59:30Z")
			f.tick(f.scheduler())
			f.at(c.down)
			f.tick(f.scheduler())
			f.finish()
			f.warnings = nil
			f.log.Reset()
			f.at(c.up)
			f.tick(f.scheduler())
			expect(t, "inbox", f.inbox(), c.inbox...)
			if c.want == "" {
				expect(t, "warnings", f.warnings)
				if strings.Contains(f.log.String(), "missed") {
					t.Errorf("log reports a miss:\n%s", f.log)
				}
				return
			}
			expect(t, "warnings", f.warnings, c.want)
			if !strings.Contains(f.log.String(), "level=WARN msg=\"cron fires missed while the controller was down\" file=tick.md") {
				t.Errorf("log lacks the missed fires:\n%s", f.log)
			}
		})
	}
}

func TestFirstSeenDoesNotFireForThePast(t *testing.T) {
	f := newFixture(t, "UTC")
	f.write("old.md", "---\ncron: \"@hourly\"\ncatch_up: true\n---\nx\n")
	f.at("2026-11-24T12:30:00Z")
	f.tick(f.scheduler())
	expect(t, "new file", f.inbox())
}

func TestInvalidFilesReportedOthersRun(t *testing.T) {
	f := newFixture(t, "UTC")
	f.write("bad.md", "---\nroutine: x\ncron: \"0 25 * * *\"\n---\nx\n")
	f.write("nocron.md", "just text\n")
	f.write("good.md", "---\ncron: \"* * * * *\"\n---\ngood\n")
	s := f.scheduler()
	f.at("2026-11-24T10:00:30Z")
	f.tick(s)
	f.at("2026-11-24T10:01:00Z")
	f.tick(s)
	expect(t, "good file runs", f.inbox(), "good-20261124-1001.md")
	log := f.log.String()
	for _, want := range []string{`bad.md:3: cron: hour field \"25\": 25 is out of range`, `nocron.md:1: no \"cron:\" field`} {
		if !strings.Contains(log, want) {
			t.Errorf("log lacks %q:\n%s", want, log)
		}
	}
	if n := strings.Count(log, "bad.md:3"); n != 1 {
		t.Errorf("bad.md reported %d times over two ticks, want once", n)
	}
}

func TestList(t *testing.T) {
	f := newFixture(t, "Europe/Berlin")
	f.cfg.DefaultRoutine = "develop"
	f.write("daily.md", "---\ncron: \"0 9 * * 1-5\"\nroutine: daily-review\n---\nx\n")
	f.write("hourly.md", "---\ncron: \"CRON_TZ=UTC 0 * * * *\"\n---\ny\n")
	f.write("broken.md", "---\ncron: \"nope\"\n---\nz\n")
	s := f.scheduler()
	f.at("2026-11-24T09:30:00Z")
	f.tick(s)
	f.at("2026-11-24T10:00:00Z")
	f.tick(s)
	f.at("2026-11-24T10:02:00Z")
	ls, err := s.List()
	if err != nil {
		t.Fatal(err)
	}
	if len(ls) != 3 {
		t.Fatalf("listed %d", len(ls))
	}
	b, d, h := ls[0], ls[1], ls[2]
	if b.File != "broken.md" || b.Err == "" || b.Schedule != "nope" || !b.NextRun.IsZero() {
		t.Errorf("broken: %+v", b)
	}
	if d.Routine != "daily-review" || d.Zone != "Europe/Berlin" || !d.LastRun.IsZero() || d.NextRun.UTC().Format(time.RFC3339) != "2026-11-25T08:00:00Z" {
		t.Errorf("daily: %+v (next %s)", d, d.NextRun.UTC())
	}
	if h.Routine != "develop" || h.Zone != "UTC" || h.LastRun.Format(time.RFC3339) != "2026-11-24T10:00:00Z" || h.NextRun.UTC().Format(time.RFC3339) != "2026-11-24T11:00:00Z" {
		t.Errorf("hourly: %+v", h)
	}
}

// TestDSTWithFakeClock ticks a minute at a time through both New York
// clock changes of 2026: the skipped 02:30 fires once at 03:00 EDT, the
// repeated 01:30 fires once.
func TestDSTWithFakeClock(t *testing.T) {
	for _, c := range []struct {
		name, from, to string
		want           []string
	}{
		{"spring forward", "2026-03-08T06:00:00Z", "2026-03-08T09:00:00Z", []string{"job-20260308-0300.md"}},
		{"fall back", "2026-11-01T04:00:00Z", "2026-11-01T08:00:00Z", []string{"job-20261101-0130.md"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t, "America/New_York")
			sched := "30 2 * * *"
			if c.name == "fall back" {
				sched = "30 1 * * *"
			}
			f.write("job.md", "---\ncron: \""+sched+"\"\n---\nx\n")
			s := f.scheduler()
			f.at(c.from)
			end, _ := time.Parse(time.RFC3339, c.to)
			var fired []string
			for ; !f.now.After(end); f.now = f.now.Add(30 * time.Second) {
				f.tick(s)
				fired = append(fired, f.inbox()...)
				f.finish()
			}
			expect(t, "fires", fired, c.want...)
		})
	}
}
