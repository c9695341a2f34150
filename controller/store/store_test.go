package store

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/decreehq/decree/pkg/layout"
	"github.com/decreehq/decree/pkg/message"
)

// fixedClock returns a clock starting at t and advancing one second per call.
func fixedClock(t time.Time) func() time.Time {
	return func() time.Time { t = t.Add(time.Second); return t }
}

func openStore(t *testing.T, root string) *Store {
	t.Helper()
	s, err := Open(root, Options{Now: fixedClock(time.Date(2025, 2, 25, 14, 32, 0, 0, time.UTC))})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// storeModes are the two ways the inbox index is kept current: from the
// kernel's change reports (the controller's) and by looking at the inbox
// directory (when no watch is available).
var storeModes = []struct {
	name  string
	watch bool
}{{"watched", true}, {"listed", false}}

// openStoreMode opens a store in one of storeModes; a watched store must
// get its watch.
func openStoreMode(t *testing.T, root string, watch bool) *Store {
	t.Helper()
	s, err := Open(root, Options{Now: fixedClock(time.Date(2025, 2, 25, 14, 32, 0, 0, time.UTC)), WatchInbox: watch})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if _, err := s.ListInbox(); err != nil {
		t.Fatal(err)
	}
	if watch && s.watch == nil {
		t.Fatal("the store did not get an inbox watch")
	}
	return s
}

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func read(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func exists(path string) bool { _, err := os.Lstat(path); return err == nil }

func TestOpenCreatesLayoutAndKeepsInstanceID(t *testing.T) {
	root := t.TempDir()
	s := openStore(t, root)
	for _, d := range []string{"inbox", "inbox/done", "inbox/dead", "outbox", "runs"} {
		if st, err := os.Stat(filepath.Join(root, ".decree", d)); err != nil || !st.IsDir() {
			t.Errorf("%s not created: %v", d, err)
		}
	}
	id := s.InstanceID()
	if len(id) != 32 {
		t.Fatalf("instance id %q: want 32 hex digits", id)
	}
	if s2 := openStore(t, root); s2.InstanceID() != id {
		t.Fatalf("instance id changed on reopen: %q then %q", id, s2.InstanceID())
	}
}

func TestCreateMessageNamesAndCollisions(t *testing.T) {
	root := t.TempDir()
	s := openStore(t, root)
	write(t, filepath.Join(s.Dir(), "inbox/done/fix-types.md"), "done before\n")
	write(t, filepath.Join(s.Dir(), "inbox/dead/fix-types-2.md"), "dead before\n")

	tests := []struct {
		name, want string
	}{
		{"fix-types", "fix-types-3.md"}, // done/ has fix-types, dead/ has -2
		{"fix-types.md", "fix-types-4.md"},
		{"review", "review.md"},
		{"review", "review-2.md"},
	}
	for _, tt := range tests {
		m, _ := message.Parse([]byte("do it\n"))
		e, err := s.CreateMessage(tt.name, m)
		if err != nil {
			t.Fatalf("CreateMessage(%q): %v", tt.name, err)
		}
		if e.File != tt.want {
			t.Errorf("CreateMessage(%q) = %s, want %s", tt.name, e.File, tt.want)
		}
		got, err := message.Parse([]byte(read(t, filepath.Join(s.Dir(), "inbox", e.File))))
		if err != nil {
			t.Fatal(err)
		}
		if got.Chain() != e.Chain || !message.ValidChain(e.Chain) || got.Type() != "task" || string(got.Body) != "do it\n" {
			t.Errorf("%s: chain %q (entry %q) type %q body %q", e.File, got.Chain(), e.Chain, got.Type(), got.Body)
		}
		if seq, _ := got.Seq(); seq != 0 {
			t.Errorf("%s: seq %d, want 0", e.File, seq)
		}
	}
	for _, bad := range []string{"../escape", "a/b", "x\x00y"} {
		m, _ := message.Parse([]byte("x"))
		if _, err := s.CreateMessage(bad, m); err == nil {
			t.Errorf("CreateMessage(%q) succeeded; want an error", bad)
		}
	}
	// Chain ids handed out are strictly increasing.
	es, err := s.ListInbox()
	if err != nil {
		t.Fatal(err)
	}
	var chains []string
	for _, e := range es {
		chains = append(chains, e.Chain)
	}
	if !slices.IsSorted(chains) || len(slices.Compact(slices.Clone(chains))) != len(chains) {
		t.Errorf("chains not unique and increasing: %v", chains)
	}
}

func TestListInboxAssignsAndPersistsChains(t *testing.T) {
	root := t.TempDir()
	s := openStore(t, root)
	inbox := filepath.Join(s.Dir(), "inbox")
	write(t, filepath.Join(inbox, "b-later.md"), "second\n")
	write(t, filepath.Join(inbox, "a-earlier.md"), "---\nroutine: develop\n---\nfirst\n")
	old := time.Now().Add(-time.Hour)
	os.Chtimes(filepath.Join(inbox, "a-earlier.md"), old, old)
	write(t, filepath.Join(inbox, "2025010100000000-3.md"), "from a routine\n")
	write(t, filepath.Join(inbox, "broken.md"), "---\nkey: [unclosed\n---\nbody\n")
	write(t, filepath.Join(inbox, "notes.txt"), "not a message")
	write(t, filepath.Join(inbox, ".hidden.md.tmp-123"), "temp")

	es, err := s.ListInbox()
	if err != nil {
		t.Fatal(err)
	}
	var files []string
	for _, e := range es {
		files = append(files, e.File)
	}
	want := []string{"2025010100000000-3.md", "a-earlier.md", "b-later.md", "broken.md"}
	if !slices.Equal(files, want) {
		t.Fatalf("files %v, want %v", files, want)
	}
	if es[0].ID != "2025010100000000-3" || es[0].Seq != 3 {
		t.Errorf("chain file: id %q seq %d", es[0].ID, es[0].Seq)
	}
	if !(es[1].Chain < es[2].Chain) {
		t.Errorf("the earlier file should get the smaller chain: %s vs %s", es[1].Chain, es[2].Chain)
	}
	var bad *BadMessageError
	if !errors.As(es[3].Err, &bad) || bad.Reason != ReasonInvalidMessage {
		t.Errorf("broken.md: err %v, want a BadMessageError", es[3].Err)
	}
	if got := read(t, filepath.Join(inbox, "broken.md")); got != "---\nkey: [unclosed\n---\nbody\n" {
		t.Errorf("broken file was modified: %q", got)
	}
	// The assigned chain is in the file, and survives a reopen.
	disk, _ := message.Parse([]byte(read(t, filepath.Join(inbox, "a-earlier.md"))))
	if disk.Chain() != es[1].Chain || disk.Routine() != "develop" || string(disk.Body) != "first\n" {
		t.Errorf("persisted: chain %q routine %q body %q", disk.Chain(), disk.Routine(), disk.Body)
	}
	s2 := openStore(t, root)
	es2, err := s2.ListInbox()
	if err != nil {
		t.Fatal(err)
	}
	if es2[1].Chain != es[1].Chain || es2[2].Chain != es[2].Chain {
		t.Errorf("chains changed across reopen: %s,%s then %s,%s", es[1].Chain, es[2].Chain, es2[1].Chain, es2[2].Chain)
	}
	// A new chain after reopen is greater than every chain on disk.
	if next := s2.Chains().Next(); next <= es[2].Chain {
		t.Errorf("next chain %s is not above %s", next, es[2].Chain)
	}
}

func TestDeadLetterNoteAndRequeue(t *testing.T) {
	root := t.TempDir()
	s := openStore(t, root)
	content := "---\nchain: 2025010100000000\nseq: 12\n---\nbinary \x00\xff body\r\n"
	write(t, filepath.Join(s.Dir(), "inbox/2025010100000000-12.md"), content)
	dead, err := s.DeadLetter("2025010100000000-12.md", DeadNote{Reason: ReasonMaxDepthExceeded, MessageID: "2025010100000000-12", Detail: "too deep\nsecond line"})
	if err != nil {
		t.Fatal(err)
	}
	if dead != "2025010100000000-12.md" {
		t.Errorf("dead name %s", dead)
	}
	if got := read(t, filepath.Join(s.Dir(), "inbox/dead", dead)); got != content {
		t.Errorf("dead letter not byte for byte: %q", got)
	}
	if exists(filepath.Join(s.Dir(), "inbox", dead)) {
		t.Error("message still in inbox")
	}
	notePath := filepath.Join(s.Dir(), "inbox/dead", dead+layout.DeadNoteSuffix)
	note := read(t, notePath)
	for _, want := range []string{"reason: MaxDepthExceeded", "message_id: 2025010100000000-12", "too deep\nsecond line"} {
		if !strings.Contains(note, want) {
			t.Errorf("note lacks %q:\n%s", want, note)
		}
	}
	list, err := s.ListDead()
	if err != nil || len(list) != 1 || list[0].Note.Reason != ReasonMaxDepthExceeded || list[0].File != dead {
		t.Fatalf("ListDead = %+v, %v", list, err)
	}
	// The note is ignored by the inbox scanner even when moved there by hand.
	write(t, filepath.Join(s.Dir(), "inbox", dead+layout.DeadNoteSuffix), note)
	es, _ := s.ListInbox()
	if len(es) != 0 {
		t.Errorf("inbox scanner picked up %v", es)
	}
	os.Remove(filepath.Join(s.Dir(), "inbox", dead+layout.DeadNoteSuffix))

	back, err := s.Requeue(dead)
	if err != nil {
		t.Fatal(err)
	}
	if back != dead || read(t, filepath.Join(s.Dir(), "inbox", back)) != content {
		t.Errorf("requeued as %s with different content", back)
	}
	if exists(notePath) || exists(filepath.Join(s.Dir(), "inbox/dead", dead)) {
		t.Error("requeue left the note or the dead file")
	}
	if _, err := s.Requeue("nothing.md"); err == nil {
		t.Error("requeue of a missing file succeeded")
	}
	if _, err := s.Requeue("../inbox/x.md"); err == nil {
		t.Error("requeue accepted a path")
	}
	// Dead-lettering the same name twice keeps both.
	for i := 0; i < 2; i++ {
		write(t, filepath.Join(s.Dir(), "inbox/same.md"), "x")
		if _, err := s.DeadLetter("same.md", DeadNote{Reason: "R"}); err != nil {
			t.Fatal(err)
		}
	}
	if !exists(filepath.Join(s.Dir(), "inbox/dead/same.md")) || !exists(filepath.Join(s.Dir(), "inbox/dead/same-2.md"+layout.DeadNoteSuffix)) {
		t.Error("second dead letter of the same name did not get a suffix")
	}
}

func TestMarkDone(t *testing.T) {
	s := openStore(t, t.TempDir())
	write(t, filepath.Join(s.Dir(), "inbox/x.md"), "one")
	write(t, filepath.Join(s.Dir(), "inbox/done/x.md"), "older")
	got, err := s.MarkDone("x.md")
	if err != nil {
		t.Fatal(err)
	}
	if got != "x-2.md" || read(t, filepath.Join(s.Dir(), "inbox/done/x-2.md")) != "one" || read(t, filepath.Join(s.Dir(), "inbox/done/x.md")) != "older" {
		t.Errorf("MarkDone = %s", got)
	}
	if _, err := s.MarkDone("x.md"); err == nil {
		t.Error("MarkDone of a missing file succeeded")
	}
}

// TestCrashRecovery simulates a controller killed at each step of the
// multi-step operations and checks that a reopen leaves a consistent state.
func TestCrashRecovery(t *testing.T) {
	root := t.TempDir()
	s := openStore(t, root)
	d := s.Dir()
	// Interrupted atomic writes: temporary files wherever decree writes
	// one (done/ is not among them: messages enter it by rename, and it
	// is not listed at every open since it grows with the history).
	temps := []string{
		"inbox/.a.md.tmp-111", "inbox/dead/.c.md.dead.txt.tmp-3",
		"outbox/.d.md.tmp-4", "runs/2025010100000000-0/.state.json.tmp-5", ".processed.md.tmp-6",
	}
	for _, p := range temps {
		write(t, filepath.Join(d, p), "partial")
	}
	// Dead-letter interrupted after the note, before the move: the message
	// is still in the inbox.
	write(t, filepath.Join(d, "inbox/half-dead.md"), "msg")
	write(t, filepath.Join(d, "inbox/dead/half-dead.md"+layout.DeadNoteSuffix), "reason: X\n")
	// Requeue interrupted after the move, before the note removal.
	write(t, filepath.Join(d, "inbox/half-requeued.md"), "msg2")
	write(t, filepath.Join(d, "inbox/dead/half-requeued.md"+layout.DeadNoteSuffix), "reason: Y\n")
	// A complete dead letter must keep its note.
	write(t, filepath.Join(d, "inbox/dead/whole.md"), "msg3")
	write(t, filepath.Join(d, "inbox/dead/whole.md"+layout.DeadNoteSuffix), "reason: Z\n")
	// A run whose attempt was under way.
	m, _ := message.Parse([]byte("---\nchain: 2025010100000000\nseq: 0\n---\nbody\n"))
	if err := message.Normalize(m, message.NormalizeInput{}); err != nil {
		t.Fatal(err)
	}
	r, err := s.StartRun(RunStart{Entry: Entry{File: "x.md", ID: "2025010100000000-0", Message: m}, Routine: "develop", MaxAttempts: 3, Trigger: "inbox"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.BeginAttempt(); err != nil {
		t.Fatal(err)
	}

	s2 := openStore(t, root)
	for _, p := range temps {
		if exists(filepath.Join(d, p)) {
			t.Errorf("temporary file %s survived the reopen", p)
		}
	}
	for _, p := range []string{"inbox/dead/half-dead.md" + layout.DeadNoteSuffix, "inbox/dead/half-requeued.md" + layout.DeadNoteSuffix} {
		if exists(filepath.Join(d, p)) {
			t.Errorf("orphaned note %s survived", p)
		}
	}
	for _, p := range []string{"inbox/half-dead.md", "inbox/half-requeued.md", "inbox/dead/whole.md", "inbox/dead/whole.md" + layout.DeadNoteSuffix} {
		if !exists(filepath.Join(d, p)) {
			t.Errorf("%s lost", p)
		}
	}
	es, err := s2.ListInbox()
	if err != nil || len(es) != 2 {
		t.Fatalf("inbox after recovery: %v %v", es, err)
	}
	r2, err := s2.StartRun(RunStart{Entry: Entry{File: "x.md", ID: "2025010100000000-0", Message: m}, MaxAttempts: 3})
	if err != nil {
		t.Fatal(err)
	}
	a, ok := r2.Interrupted()
	if !ok || a.N != 1 {
		t.Fatalf("interrupted attempt not found after restart: %+v %v", a, ok)
	}
	if st := r2.State(); st.Routine != "develop" || st.Trigger != "inbox" {
		t.Errorf("state not reloaded: %+v", st)
	}
}

func TestLogNamesSortByAttempt(t *testing.T) {
	var names []string
	for n := 1; n <= 120; n++ {
		names = append(names, layout.LogName("routine", n))
	}
	if names[0] != "routine.log" || names[1] != "routine.try-002.log" || names[9] != "routine.try-010.log" {
		t.Fatalf("names: %v", names[:10])
	}
	sorted := slices.Clone(names)
	sort.Strings(sorted)
	if !slices.Equal(sorted, names) {
		t.Errorf("byte-wise sort disagrees with attempt order: %v", sorted[:12])
	}
	// Also under the system's sort(1) in the C and (when present) a UTF-8
	// locale that ignores punctuation.
	if _, err := exec.LookPath("sort"); err != nil {
		return
	}
	for _, loc := range []string{"C", "C.UTF-8", "en_US.UTF-8"} {
		cmd := exec.Command("sort")
		cmd.Env = append(os.Environ(), "LC_ALL="+loc)
		cmd.Stdin = strings.NewReader(strings.Join(reversed(names), "\n") + "\n")
		out, err := cmd.Output()
		if err != nil {
			continue
		}
		got := strings.Split(strings.TrimSpace(string(out)), "\n")
		if !slices.Equal(got, names) {
			t.Errorf("sort under LC_ALL=%s: %v", loc, got[:12])
		}
	}
}

func reversed(s []string) []string { r := slices.Clone(s); slices.Reverse(r); return r }

func TestLogPathRejectsOutsideValues(t *testing.T) {
	s := openStore(t, t.TempDir())
	for _, tt := range []struct {
		id      string
		attempt int
		stream  string
	}{
		{"../x", 1, "routine"}, {"2025010100000000-0", 1, "../etc"}, {"2025010100000000-0", 0, "routine"},
		{"2025010100000000-0/..", 1, "routine"}, {"2025010100000000-0", 1, "Routine Log"},
	} {
		if p, err := s.LogPath(tt.id, tt.attempt, tt.stream); err == nil {
			t.Errorf("LogPath(%q, %d, %q) = %s; want an error", tt.id, tt.attempt, tt.stream, p)
		}
	}
	p, err := s.LogPath("2025010100000000-0", 2, "papermill")
	if err != nil || p != filepath.Join(s.Dir(), "runs/2025010100000000-0/papermill.try-002.log") {
		t.Errorf("LogPath = %s, %v", p, err)
	}
}

func TestRunLifecycleAndRunJSON(t *testing.T) {
	root := t.TempDir()
	loc := time.FixedZone("CET", 3600)
	s, err := Open(root, Options{Now: fixedClock(time.Date(2025, 2, 25, 14, 32, 0, 0, time.UTC)), Location: loc})
	if err != nil {
		t.Fatal(err)
	}
	m, _ := message.Parse([]byte("---\nroutine: develop\ninput_file: .decree/migrations/01-a.spec.md\n---\n"))
	e, err := s.CreateMessage("add-auth", m)
	if err != nil {
		t.Fatal(err)
	}
	r, err := s.StartRun(RunStart{Entry: e, Routine: "develop", Trigger: "inbox", Migration: "01-a.spec.md", MaxAttempts: 3})
	if err != nil {
		t.Fatal(err)
	}
	if got := read(t, filepath.Join(r.Dir(), layout.MessageFile)); got != string(e.Message.Render()) {
		t.Errorf("message.md = %q", got)
	}
	for n := 1; n <= 2; n++ {
		a, err := r.BeginAttempt()
		if err != nil || a.N != n || a.LogName != layout.LogName("routine", n) {
			t.Fatalf("BeginAttempt = %+v, %v", a, err)
		}
		if _, err := r.BeginAttempt(); err == nil {
			t.Fatal("a second BeginAttempt while one runs succeeded")
		}
		code := 1
		if n == 2 {
			code = 0
		}
		if err := r.SetAttemptWorker(n, "w1"); err != nil {
			t.Fatal(err)
		}
		if err := r.FinishAttempt(n, code, map[bool]string{true: "exit status 1"}[code != 0]); err != nil {
			t.Fatal(err)
		}
	}
	write(t, filepath.Join(r.Dir(), "routine.log"), "log")
	rec, err := r.Finish(OutcomeSucceeded)
	if err != nil {
		t.Fatal(err)
	}
	var disk map[string]any
	if err := json.Unmarshal([]byte(read(t, filepath.Join(r.Dir(), layout.RunFile))), &disk); err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]any{
		"message_id": e.ID, "routine": "develop", "trigger": "inbox", "migration": "01-a.spec.md",
		"attempts": 2.0, "max_attempts": 3.0, "exit_code": 0.0, "outcome": "succeeded", "time_zone": "CET",
	} {
		if disk[k] != want {
			t.Errorf("run.json %s = %v, want %v", k, disk[k], want)
		}
	}
	start, _ := disk["start"].(string)
	if !strings.HasSuffix(start, "+01:00") {
		t.Errorf("start %q lacks the zone offset", start)
	}
	st, _ := time.Parse(time.RFC3339Nano, start)
	en, _ := time.Parse(time.RFC3339Nano, disk["end"].(string))
	if en.Sub(st).Milliseconds() != int64(disk["duration_ms"].(float64)) || en.Sub(st) <= 0 {
		t.Errorf("duration %v does not match start %s end %v", disk["duration_ms"], start, disk["end"])
	}
	if !slices.Contains(rec.Artifacts, "routine.log") || !slices.Contains(rec.Artifacts, "run.json") || slices.Contains(rec.Artifacts, "state.json") {
		t.Errorf("artifacts %v", rec.Artifacts)
	}
	if rec.Attempts != 2 || len(rec.AttemptDetails) != 2 || rec.AttemptDetails[0].ExitCode != 1 || rec.Start == "" {
		t.Errorf("record %+v", rec)
	}
	back, err := s.ReadRunRecord(e.ID)
	if err != nil || back.Outcome != OutcomeSucceeded {
		t.Errorf("ReadRunRecord = %+v, %v", back, err)
	}
	// A requeued message starts a fresh run; the old one is kept.
	r2, err := s.StartRun(RunStart{Entry: e, Routine: "develop", MaxAttempts: 3})
	if err != nil {
		t.Fatal(err)
	}
	if len(r2.State().Attempts) != 0 || !exists(filepath.Join(s.Dir(), "runs", e.ID+".prev-1", layout.RunFile)) {
		t.Errorf("fresh run: %+v; old kept: %v", r2.State(), exists(filepath.Join(s.Dir(), "runs", e.ID+".prev-1")))
	}
}

func TestProcessed(t *testing.T) {
	root := t.TempDir()
	s := openStore(t, root)
	write(t, filepath.Join(s.Dir(), layout.Processed), "# processed migrations\n- 00-old.spec.md\n\n")
	for _, n := range []string{"01-a.spec.md", "02-b.spec.md", "01-a.spec.md"} {
		if err := s.MarkProcessed(n); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.MarkProcessed("bad\nname"); err == nil {
		t.Error("multi-line name accepted")
	}
	set, err := openStore(t, root).Processed()
	if err != nil {
		t.Fatal(err)
	}
	if len(set) != 3 || !set["00-old.spec.md"] || !set["01-a.spec.md"] || !set["02-b.spec.md"] {
		t.Errorf("set %v", set)
	}
	if err := s.UnmarkProcessed("01-a.spec.md"); err != nil {
		t.Fatal(err)
	}
	if got := read(t, filepath.Join(s.Dir(), layout.Processed)); got != "# processed migrations\n- 00-old.spec.md\n02-b.spec.md\n" {
		t.Errorf("processed.md = %q", got)
	}
}

func TestCheckID(t *testing.T) {
	for id, ok := range map[string]bool{
		"2025022514320000-0": true, "2025022514320000-12": true, "2025022514320000": false,
		"../2025022514320000-0": false, "2025022514320000-0/": false, "0025022514320000-0": false, "": false,
	} {
		if err := CheckID(id); (err == nil) != ok {
			t.Errorf("CheckID(%q) = %v", id, err)
		}
	}
}

// A message that never reached a run directory (queued, or dead-lettered
// before any attempt) is named by its name, not its id; a store opened in
// the same second must still not hand out its chain again.
func TestOpenObservesChainsOfNamedMessages(t *testing.T) {
	body := func() *message.Message { m, _ := message.Parse([]byte("do it\n")); return m }
	tests := []struct{ name, dir string }{{"queued", "inbox"}, {"dead before any attempt", "inbox/dead"}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			now := func() time.Time { return time.Date(2025, 2, 25, 14, 32, 0, 0, time.UTC) } // a frozen second
			s, err := Open(root, Options{Now: now})
			if err != nil {
				t.Fatal(err)
			}
			e, err := s.CreateMessage("first", body())
			if err != nil {
				t.Fatal(err)
			}
			if tt.dir != "inbox" {
				if _, err := s.DeadLetter(e.File, DeadNote{Reason: "InvalidRoutine", MessageID: e.ID}); err != nil {
					t.Fatal(err)
				}
			}
			s2, err := Open(root, Options{Now: now})
			if err != nil {
				t.Fatal(err)
			}
			e2, err := s2.CreateMessage("second", body())
			if err != nil {
				t.Fatal(err)
			}
			if e2.Chain <= e.Chain {
				t.Errorf("second store issued chain %s after %s (in %s)", e2.Chain, e.Chain, tt.dir)
			}
		})
	}
}
