package store

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/decreehq/decree/pkg/layout"
	"github.com/decreehq/decree/pkg/message"
)

// TestInboxIndex: listings come from the index; the store's own writes
// and files dropped in by hand are seen at the next listing; an unchanged
// file is not parsed again.
func TestInboxIndex(t *testing.T) {
	st, err := Open(t.TempDir(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	names := func() []string {
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
		if e.File == a.File && (e.Err != nil || e.ID != a.ID) {
			t.Errorf("unchanged a.md was parsed again: %+v", e)
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
