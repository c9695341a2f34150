package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	decreev1 "github.com/decreehq/decree/proto/decree/v1"
	"google.golang.org/protobuf/types/known/timestamppb"
)

var update = flag.Bool("update", false, "rewrite the golden files")

func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		t.Errorf("%s differs:\n--- got\n%s--- want\n%s", name, got, want)
	}
}

func at(s string) *timestamppb.Timestamp {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return timestamppb.New(t)
}

// cronListing is a listing as a controller answers it at 2026-11-24 10:02 UTC.
var cronListing = &decreev1.ListCronEntriesResponse{Entries: []*decreev1.CronEntry{
	{File: "broken.md", Schedule: "0 25 * * *", Routine: "develop", TimeZone: "Europe/Berlin",
		Error: "broken.md:2: cron: hour field \"25\": 25 is out of range; use 0 to 23"},
	{File: "daily-review.md", Schedule: "0 9 * * 1-5", Routine: "daily-review", TimeZone: "Europe/Berlin",
		LastRun: at("2026-11-24T10:00:00Z"), NextRun: at("2026-11-25T08:00:00Z")},
	{File: "hourly-sync.md", Schedule: "0 * * * *", Routine: "gmail-sync", TimeZone: "Europe/Berlin",
		NextRun: at("2026-11-24T10:15:00Z")},
	{File: "weekly.md", Schedule: "CRON_TZ=America/New_York @weekly", Routine: "develop", TimeZone: "America/New_York", CatchUp: true,
		LastRun: at("2026-11-22T05:00:00Z"), NextRun: at("2026-11-29T05:00:00Z")},
	{File: "soon.md", Schedule: "* * * * *", Routine: "develop", TimeZone: "UTC",
		LastRun: at("2026-11-24T10:01:00Z"), NextRun: at("2026-11-24T10:02:40Z")},
}}

func TestCronListGolden(t *testing.T) {
	now, _ := time.Parse(time.RFC3339, "2026-11-24T10:02:00Z")
	var b bytes.Buffer
	printCronTable(&b, cronListing, now)
	golden(t, "cron-list.golden", b.String())
	b.Reset()
	if err := printCronJSON(&b, cronListing); err != nil {
		t.Fatal(err)
	}
	golden(t, "cron-list.json.golden", b.String())
	b.Reset()
	printCronTable(&b, &decreev1.ListCronEntriesResponse{}, now)
	if b.String() != "No cron files.\n" {
		t.Errorf("empty listing: %q", b.String())
	}
}

func TestSpan(t *testing.T) {
	for d, want := range map[time.Duration]string{
		0: "now", 45 * time.Second: "45s", 13*time.Minute + 59*time.Second: "13m", 2*time.Hour + 5*time.Minute: "2h5m",
		3 * time.Hour: "3h", 23*time.Hour + 58*time.Minute: "23h", 50 * time.Hour: "2d2h", 72 * time.Hour: "3d", -time.Minute: "now",
	} {
		if got := span(d); got != want {
			t.Errorf("span(%s) = %q, want %q", d, got, want)
		}
	}
}

// TestCronListCommand runs `decreectl cron list` against an embedded
// controller on a real project.
func TestCronListCommand(t *testing.T) {
	root := t.TempDir()
	for _, d := range []string{"cron", "routines"} {
		if err := os.MkdirAll(filepath.Join(root, ".decree", d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(root, ".decree", "config.yml"), []byte("time_zone: Europe/Berlin\ndefault_routine: develop\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) (string, string, int) {
		var out, errb bytes.Buffer
		code := Main(context.Background(), append([]string{"-C", root}, args...), nil, &out, &errb)
		return out.String(), errb.String(), code
	}
	out, errs, code := run("cron", "list")
	if code != 0 || out != "No cron files.\n" {
		t.Fatalf("empty project: exit %d\n%s%s", code, out, errs)
	}
	write := func(name, content string) {
		if err := os.WriteFile(filepath.Join(root, ".decree", "cron", name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("daily-review.md", "---\ncron: \"0 9 * * 1-5\"\nroutine: daily-review\n---\nreview\n")
	write("hourly.md", "---\ncron: \"@hourly\"\n---\nsync\n")
	write("broken.md", "---\nroutine: x\ncron: \"0 25 * * *\"\n---\n")
	out, errs, code = run("cron", "list")
	if code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out, errs)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 6 || strings.Join(strings.Fields(lines[0]), " ") != "FILE SCHEDULE ROUTINE LAST RUN NEXT" {
		t.Fatalf("listing:\n%s", out)
	}
	for i, want := range []string{"broken.md 0 25 * * * x never invalid", "daily-review.md 0 9 * * 1-5 daily-review never ", "hourly.md @hourly develop never "} {
		if got := strings.Join(strings.Fields(lines[i+1]), " "); !strings.HasPrefix(got, want) {
			t.Errorf("row %d = %q, want prefix %q", i+1, got, want)
		}
	}
	if !strings.Contains(lines[5], "ignored: broken.md:3: cron: hour field") {
		t.Errorf("broken file not explained:\n%s", out)
	}
	out, errs, code = run("-o", "json", "cron", "list")
	var entries []cronJSON
	if err := json.Unmarshal([]byte(out), &entries); err != nil || code != 0 {
		t.Fatalf("json: %v exit %d\n%s%s", err, code, out, errs)
	}
	if len(entries) != 3 || entries[1].TimeZone != "Europe/Berlin" || entries[1].NextRun == nil || !strings.HasSuffix(*entries[1].NextRun, ":00+01:00") || entries[1].LastRun != nil {
		t.Errorf("json entries: %+v", entries)
	}
	if entries[2].NextRun == nil {
		t.Fatal("hourly: no next run")
	}
	next, err := time.Parse(time.RFC3339, *entries[2].NextRun)
	if err != nil || next.Minute() != 0 || time.Until(next) > time.Hour || time.Until(next) < -time.Minute {
		t.Errorf("hourly next run %q (%v)", *entries[2].NextRun, err)
	}
}
