package store

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// DeadStats counts dead letters and dates the oldest by its note, or by the
// file's modification time when it has no note.
func TestDeadStats(t *testing.T) {
	root := t.TempDir()
	s := openStore(t, root)
	if n, oldest, err := s.DeadStats(); err != nil || n != 0 || !oldest.IsZero() {
		t.Fatalf("empty: %d %v %v", n, oldest, err)
	}
	noted := time.Date(2025, 2, 20, 8, 0, 0, 0, time.UTC)
	for _, f := range []string{"a.md", "b.md"} {
		write(t, filepath.Join(root, ".decree", "inbox", f), "body\n")
	}
	if _, err := s.DeadLetter("a.md", DeadNote{Reason: "X", Time: noted}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.DeadLetter("b.md", DeadNote{Reason: "Y", Time: noted.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	n, oldest, err := s.DeadStats()
	if err != nil || n != 2 || !oldest.Equal(noted) {
		t.Fatalf("with notes: %d %v %v, want 2 and %v", n, oldest, err, noted)
	}
	// A dead letter dropped in by hand has no note: its mtime counts.
	hand := filepath.Join(root, ".decree", "inbox", "dead", "c.md")
	write(t, hand, "body\n")
	old := noted.Add(-48 * time.Hour)
	if err := os.Chtimes(hand, old, old); err != nil {
		t.Fatal(err)
	}
	if n, oldest, _ = s.DeadStats(); n != 3 || !oldest.Equal(old) {
		t.Fatalf("without a note: %d %v, want 3 and %v", n, oldest, old)
	}
}
