package store

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/decreehq/decree/pkg/layout"
	"github.com/decreehq/decree/pkg/message"
)

// testInboxIndex: listings come from the index; the store's own writes
// and files dropped in by hand are seen at the next listing; a file whose
// identity (size, time, inode) did not change is not parsed again unless
// the watch reported a write to it.
// The modes are in TestInboxIndexBothModes.
func testInboxIndex(t *testing.T, st *Store) {
	names := func() []string { t.Helper(); return inboxFiles(t, st) }
	a, err := st.CreateMessage("a", &message.Message{Body: []byte("a\n")})
	if err != nil {
		t.Fatal(err)
	}
	if got := names(); len(got) != 1 || got[0] != "a.md" {
		t.Fatalf("after create: %v", got)
	}
	b, err := st.CreateMessage("b", &message.Message{Body: []byte("b\n")})
	if err != nil {
		t.Fatal(err)
	}
	if got := names(); len(got) != 2 {
		t.Fatalf("after a second create: %v", got)
	}
	if !st.inbox.valid {
		t.Errorf("the store's own write invalidated the index")
	}
	// Dropped in by hand: seen at once (the directory changed).
	dir := filepath.Join(st.Dir(), layout.Inbox)
	if err := os.WriteFile(filepath.Join(dir, "hand.md"), []byte("by hand\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := names(); len(got) != 3 {
		t.Fatalf("after a file dropped in: %v", got)
	}
	// An unchanged file keeps its parse: overwrite a.md in place with
	// garbage of the same size and restore its time; a new listing (forced
	// by another file) still has a's message.
	pa := filepath.Join(dir, a.File)
	fi, err := os.Stat(pa)
	if err != nil {
		t.Fatal(err)
	}
	garbage := make([]byte, fi.Size())
	for i := range garbage {
		garbage[i] = '\x01'
	}
	f, err := os.OpenFile(pa, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(garbage); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if err := os.Chtimes(pa, fi.ModTime(), fi.ModTime()); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "other.md"), []byte("x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	es, err := st.ListInbox()
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range es {
		if e.File != a.File {
			continue
		}
		switch {
		case st.watch == nil && (e.Err != nil || e.ID != a.ID):
			t.Errorf("a.md, of unchanged identity, was parsed again: %+v", e)
		case st.watch != nil && e.Err == nil && e.ID == a.ID:
			t.Errorf("a.md was written and reported, but not read again: %+v", e)
		}
	}
	// Done and dead leave the index without a new listing.
	if _, err := st.MarkDone(b.File); err != nil {
		t.Fatal(err)
	}
	if _, err := st.DeadLetter("hand.md", DeadNote{Reason: "Test"}); err != nil {
		t.Fatal(err)
	}
	got := names()
	if len(got) != 2 {
		t.Fatalf("after done and dead: %v", got)
	}
	for _, n := range got {
		if n == b.File || n == "hand.md" {
			t.Errorf("%s still listed", n)
		}
	}
}

// TestFreshSeesContentWrittenAfterListing: a file listed while its writer
// had not finished (empty) is read again when it is taken.
func TestFreshSeesContentWrittenAfterListing(t *testing.T) {
	st, err := Open(t.TempDir(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(st.Dir(), layout.Inbox, "2026010100000000-1.md")
	if err := os.WriteFile(p, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	es, err := st.ListInbox()
	if err != nil || len(es) != 1 {
		t.Fatalf("list: %v %v", es, err)
	}
	if err := os.WriteFile(p, []byte("---\nlast: 99\n---\nnext\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if es2, _ := st.ListInbox(); es2[0].Message.GetString("last") != "" {
		t.Logf("the listing already saw the new content")
	}
	f := st.Fresh(es[0])
	if got := f.Message.GetString("last"); got != "99" {
		t.Errorf("Fresh: last = %q, want 99 (content written after the listing)", got)
	}
	if es3, _ := st.ListInbox(); es3[0].Message.GetString("last") != "99" {
		t.Errorf("the index was not updated by Fresh")
	}
}

// Between full listings the index follows names added and removed by
// hand without reading the files it knows: the order is the processing
// order, a removed file leaves, and a known file edited in place keeps its
// indexed parse until the next full listing.
func TestInboxRelistsNamesOnly(t *testing.T) {
	st, err := Open(t.TempDir(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(st.Dir(), layout.Inbox)
	write := func(name, data string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	files := func() []string { t.Helper(); return inboxFiles(t, st) }
	write("2026010100000000-0.md", "first chain\n")
	write("2026010100000002-0.md", "third chain\n")
	write("2026010100000003-0.md", "---\nroutine: before\n---\nfourth chain\n")
	if got := files(); len(got) != 3 {
		t.Fatalf("first listing: %v", got)
	}
	if !st.inbox.fullAt.After(time.Time{}) {
		t.Fatal("the first listing was not a full one")
	}
	fullAt := st.inbox.fullAt
	// A known file edited in place (same name): not read again yet.
	write("2026010100000003-0.md", "---\nroutine: after\n---\nfourth chain\n")
	write("2026010100000001-0.md", "second chain\n")
	write("2026010100000001-1.md", "second chain, next\n")
	if err := os.Remove(filepath.Join(dir, "2026010100000002-0.md")); err != nil {
		t.Fatal(err)
	}
	want := []string{"2026010100000000-0.md", "2026010100000001-0.md", "2026010100000001-1.md", "2026010100000003-0.md"}
	got := files()
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("after names added and removed: %v, want %v", got, want)
	}
	if st.inbox.fullAt != fullAt {
		t.Fatal("the listing was a full one; want names only within the rescan interval")
	}
	if len(st.inbox.keys) != len(st.inbox.entries) {
		t.Errorf("%d keys for %d entries", len(st.inbox.keys), len(st.inbox.entries))
	}
	routineOf := func() string {
		es, _ := st.ListInbox()
		for _, e := range es {
			if e.File == "2026010100000003-0.md" {
				return e.Message.Routine()
			}
		}
		return ""
	}
	if r := routineOf(); r != "before" {
		t.Errorf("the known file was read again between full listings: routine %q", r)
	}
	// The next full listing reads the edit.
	st.inbox.fullAt = time.Now().Add(-2 * RescanInterval)
	st.inbox.valid = false
	if r := routineOf(); r != "after" {
		t.Errorf("after a full listing the routine is %q, want the edited one", r)
	}
}

// inboxFiles lists the inbox's file names in processing order.
func inboxFiles(t *testing.T, st *Store) []string {
	t.Helper()
	es, err := st.ListInbox()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range es {
		out = append(out, e.File)
	}
	return out
}

// TestWriteDuringReadIsSeen: a file that is still being written when the
// index reads it is indexed under its identity from before the read, so
// the end of the write shows as a change and the message is taken with
// its whole content (it once ran with the frontmatter of an empty file).
func TestWriteDuringReadIsSeen(t *testing.T) {
	for _, mode := range storeModes {
		t.Run(mode.name, func(t *testing.T) {
			st := openStoreMode(t, t.TempDir(), mode.watch)
			p := filepath.Join(st.Dir(), layout.Inbox, "2026010100000000-1.md")
			if err := os.WriteFile(p, nil, 0o644); err != nil {
				t.Fatal(err)
			}
			afterRead = func(path string) {
				if path == p {
					afterRead = nil
					if err := os.WriteFile(p, []byte("---\nlast: 99\n---\nnext\n"), 0o644); err != nil {
						t.Error(err)
					}
				}
			}
			defer func() { afterRead = nil }()
			es, err := st.ListInbox()
			if err != nil || len(es) != 1 {
				t.Fatalf("list: %v %v", es, err)
			}
			if got := st.Fresh(es[0]).Message.GetString("last"); got != "99" {
				t.Errorf("taken with last = %q, want 99 (written while it was read)", got)
			}
		})
	}
}
