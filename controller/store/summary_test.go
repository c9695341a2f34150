package store

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/decreehq/decree/pkg/message"
)

// TestSummarizeWithoutIndex: a fresh store (status with no controller)
// summarises from names and open runs without reading the queue, and
// gives what the indexed summary gives: the count (a file that is not a
// usable message included), done, dead and the interrupted message.
func TestSummarizeWithoutIndex(t *testing.T) {
	root := t.TempDir()
	s := openStore(t, root)
	var first Entry
	for i, name := range []string{"a", "b", "c"} {
		e, err := s.CreateMessage(name, &message.Message{Body: []byte(name + "\n")})
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			first = e
		}
	}
	write(t, filepath.Join(root, ".decree", "inbox", "broken.md"), "---\nkey: [\n---\n")
	write(t, filepath.Join(root, ".decree", "inbox", "notes.txt"), "not a message\n")
	run, err := s.StartRun(RunStart{Entry: first, Routine: "develop", MaxAttempts: 2})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := run.BeginAttempt(); err != nil {
		t.Fatal(err)
	}
	if err := run.InterruptAttempt(1, "shutdown"); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, ".decree", "inbox", "done", "x.md"), []byte("x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s.Close()

	fresh := openStore(t, root)
	defer fresh.Close()
	if fresh.inbox.keys != nil {
		t.Fatal("the fresh store has an index already; the test would not test the unindexed path")
	}
	byNames, err := fresh.Summarize()
	if err != nil {
		t.Fatal(err)
	}
	if fresh.inbox.keys != nil {
		t.Error("Summarize read the whole queue to build an index")
	}
	if _, err := fresh.ListInbox(); err != nil {
		t.Fatal(err)
	}
	indexed, err := fresh.Summarize()
	if err != nil {
		t.Fatal(err)
	}
	if byNames.Queued != 4 || byNames.Done != 1 || len(byNames.Interrupted) != 1 || byNames.Interrupted[0].ID != first.ID || byNames.Interrupted[0].Attempt != 1 {
		t.Errorf("summary without index = %+v", byNames)
	}
	for i := range byNames.Interrupted {
		byNames.Interrupted[i].Message, indexed.Interrupted[i].Message = nil, nil
	}
	if !reflect.DeepEqual(byNames, indexed) {
		t.Errorf("summaries differ:\nby names %+v\nindexed  %+v", byNames, indexed)
	}
}

// The directory cache serves a summary only while it provably still
// holds: an inbox changed after the listing is listed again, whether its
// stamp was old or recent.
func TestSummaryAfterOpenSeesLaterChanges(t *testing.T) {
	for _, tc := range []struct {
		name   string
		age    time.Duration // how old the inbox's mtime is at open
		change func(t *testing.T, inbox string)
		want   int
		reused bool
	}{
		{"old and unchanged", time.Hour, func(*testing.T, string) {}, 3, true},
		{"recent and unchanged", 0, func(*testing.T, string) {}, 3, false},
		{"old, one added", time.Hour, func(t *testing.T, inbox string) { write(t, filepath.Join(inbox, "d.md"), "d\n") }, 4, false},
		{"recent, one added", 0, func(t *testing.T, inbox string) { write(t, filepath.Join(inbox, "d.md"), "d\n") }, 4, false},
		{"old, one removed", time.Hour, func(t *testing.T, inbox string) {
			if err := os.Remove(filepath.Join(inbox, "a.md")); err != nil {
				t.Fatal(err)
			}
		}, 2, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			openStore(t, root).Close() // lays out .decree/
			inbox := filepath.Join(root, ".decree", "inbox")
			for _, n := range []string{"a", "b", "c"} {
				write(t, filepath.Join(inbox, n+".md"), n+"\n")
			}
			if tc.age > 0 {
				old := time.Now().Add(-tc.age)
				if err := os.Chtimes(inbox, old, old); err != nil {
					t.Fatal(err)
				}
			}
			s := openStore(t, root)
			defer s.Close()
			tc.change(t, inbox)
			sum, err := s.Summarize()
			if err != nil {
				t.Fatal(err)
			}
			if sum.Queued != tc.want {
				t.Errorf("queued = %d, want %d", sum.Queued, tc.want)
			}
			// The listing is reused exactly when the stamp proves it current.
			if got := s.reusedOpen; got != tc.reused {
				t.Errorf("open listing reused = %v, want %v", got, tc.reused)
			}
		})
	}
}
