package store

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"

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
