package store

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/decreehq/decree/pkg/layout"
)

// TestWatchedIndexListsNothing: with a watch, listings after the first do
// not look at the inbox directory (no listing runs), yet files added,
// edited in place and removed by hand show at the next call.
func TestWatchedIndexListsNothing(t *testing.T) {
	st := openStoreMode(t, t.TempDir(), true)
	dir := filepath.Join(st.Dir(), layout.Inbox)
	put := func(name, data string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	put("2026010100000000-0.md", "---\nroutine: first\n---\none\n")
	if got := inboxFiles(t, st); len(got) != 1 {
		t.Fatalf("after a file dropped in: %v", got)
	}
	checked := st.inbox.checked
	put("2026010100000001-0.md", "two\n")
	put("2026010100000000-0.md", "---\nroutine: edited\n---\none, edited in place\n")
	es, err := st.ListInbox()
	if err != nil || len(es) != 2 {
		t.Fatalf("after a second file and an edit: %v %v", es, err)
	}
	if es[0].Message.Routine() != "edited" {
		t.Errorf("an edit in place is not seen at once: routine %q", es[0].Message.Routine())
	}
	if err := os.Remove(filepath.Join(dir, "2026010100000001-0.md")); err != nil {
		t.Fatal(err)
	}
	if got := inboxFiles(t, st); len(got) != 1 || got[0] != "2026010100000000-0.md" {
		t.Errorf("after a removal: %v", got)
	}
	if st.inbox.checked != checked {
		t.Errorf("the inbox was listed again; a watched index follows the kernel's reports")
	}
	// Closed, the store falls back to listing.
	st.Close()
	put("2026010100000002-0.md", "three\n")
	if got := inboxFiles(t, st); len(got) != 2 {
		t.Errorf("after Close and a file dropped in: %v", got)
	}
}

// TestWatchOverflow: when the kernel drops reports (its queue overflowed)
// the index lists the inbox in full under a new watch and misses nothing.
func TestWatchOverflow(t *testing.T) {
	limit := 16384
	if b, err := os.ReadFile("/proc/sys/fs/inotify/max_queued_events"); err == nil {
		if n, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
			limit = n
		}
	}
	if limit > 1<<20 {
		t.Skipf("max_queued_events is %d: too many events to overflow in a test", limit)
	}
	st := openStoreMode(t, t.TempDir(), true)
	dir := filepath.Join(st.Dir(), layout.Inbox)
	a, b := filepath.Join(dir, "2026010100000000-0.md"), filepath.Join(dir, "2026010100000001-0.md")
	for _, p := range []string{a, b} {
		if err := os.WriteFile(p, []byte("x\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if got := inboxFiles(t, st); len(got) != 2 {
		t.Fatalf("first listing: %v", got)
	}
	checked := st.inbox.checked
	// Alternating touches are not merged by the kernel: limit+100 reports.
	now := time.Now()
	for i := 0; i < limit+100; i++ {
		p := a
		if i%2 == 1 {
			p = b
		}
		if err := os.Chtimes(p, now, now.Add(time.Duration(i))); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "2026010100000002-0.md"), []byte("after the storm\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := inboxFiles(t, st); len(got) != 3 {
		t.Errorf("after an overflow: %v, want 3 files", got)
	}
	if st.inbox.checked == checked {
		t.Errorf("no full listing after an overflow")
	}
	if st.watch == nil {
		t.Errorf("no new watch after an overflow")
	}
}

// TestWatchFollowsReplacedInbox: an inbox directory moved away and made
// again is watched anew; the old one's files are gone from the listing.
func TestWatchFollowsReplacedInbox(t *testing.T) {
	st := openStoreMode(t, t.TempDir(), true)
	dir := filepath.Join(st.Dir(), layout.Inbox)
	if err := os.WriteFile(filepath.Join(dir, "old.md"), []byte("old\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := inboxFiles(t, st); len(got) != 1 {
		t.Fatalf("first listing: %v", got)
	}
	if err := os.Rename(dir, dir+".moved"); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("new-%d.md", i)), []byte("new\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		got := inboxFiles(t, st)
		if len(got) != i+1 || got[len(got)-1] == "old.md" {
			t.Errorf("after the inbox was replaced and %d files written: %v", i+1, got)
		}
	}
}

// TestInboxIndexBothModes runs the index's behaviour with a watch too.
func TestInboxIndexBothModes(t *testing.T) {
	for _, mode := range storeModes {
		t.Run(mode.name, func(t *testing.T) { testInboxIndex(t, openStoreMode(t, t.TempDir(), mode.watch)) })
	}
}
