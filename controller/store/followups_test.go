package store

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/decreehq/decree/pkg/layout"
	"github.com/decreehq/decree/pkg/message"
)

const chainA = "2025022514320000"
const chainB = "2025022514320001"

type file struct{ path, content string }

// collectCase is one attempt's files and what collecting must make of them.
type collectCase struct {
	name      string
	seq       int
	preexist  []file // present before the attempt
	written   []file // written by the routine
	wantQueue []string
	wantDead  []string // dead/ names
	wantWhy   []string // substrings of the notes, same order as wantDead
	wantLeft  []string // still in outbox/
}

func TestCollectFollowUps(t *testing.T) {
	tests := []collectCase{
		{
			name: "outbox files become consecutive seqs in lexical order",
			seq:  0,
			written: []file{
				{"outbox/b-second.md", "---\nroutine: review\n---\nsecond\n"},
				{"outbox/a-first.md", "first\n"},
				{"outbox/c-third.md", "---\nchain: 1999010100000000\nseq: 7\nid: 1999010100000000-7\n---\nthird\n"},
				{"outbox/readme.txt", "not a message"},
			},
			wantQueue: []string{chainA + "-1.md", chainA + "-2.md", chainA + "-3.md"},
			wantLeft:  []string{"readme.txt"},
		},
		{
			name:      "seqs continue after the highest of the chain",
			seq:       1,
			preexist:  []file{{"inbox/done/" + chainA + "-4.md", "x"}, {"inbox/" + chainB + "-9.md", "other chain"}},
			written:   []file{{"inbox/" + chainA + "-2.md", "direct\n"}, {"outbox/next.md", "n\n"}},
			wantQueue: []string{chainA + "-2.md", chainA + "-5.md"},
		},
		{
			name: "inbox follow-ups of another chain, with a smaller seq, or unparsable are dead-lettered",
			seq:  3,
			written: []file{
				{"inbox/" + chainB + "-4.md", "wrong chain\n"},
				{"inbox/" + chainA + "-3.md", "same seq\n"},
				{"inbox/" + chainA + "-1.md", "smaller\n"},
				{"inbox/" + chainA + "-5.md", "---\nkey: [\n---\n"},
				{"inbox/12-4.md", "short chain\n"},
				{"inbox/" + chainA + "-6.md", "fine\n"},
				{"inbox/hand-dropped.md", "a user's message\n"},
			},
			wantQueue: []string{chainA + "-6.md"},
			// Each rejected follow-up is a message of its own: chainA-5 keeps
			// the id its name gives it, the others get the next free ids
			// after the queued follow-ups, in name order.
			wantDead: []string{chainA + "-10.md", chainA + "-5.md", chainA + "-7.md", chainA + "-8.md", chainA + "-9.md"},
			wantWhy:  []string{"belongs to chain " + chainB, "does not parse", "not <chain>-<seq>.md", "not greater", "not greater"},
		},
		{
			name:     "unparsable outbox file is dead-lettered byte for byte",
			seq:      0,
			written:  []file{{"outbox/bad.md", "---\nx: [\n---\nbody\x00"}, {"outbox/good.md", "ok\n"}},
			wantDead: []string{chainA + "-2.md"}, wantWhy: []string{"does not parse"},
			wantQueue: []string{chainA + "-1.md"},
		},
		{
			name:      "files present before the attempt are not follow-ups",
			seq:       0,
			preexist:  []file{{"inbox/" + chainB + "-1.md", "queued earlier\n"}},
			wantQueue: nil,
		},
	}
	for _, mode := range storeModes {
		for _, full := range []bool{false, true} {
			for _, tt := range tests {
				name := mode.name + "/" + tt.name
				if full {
					name = mode.name + "/full listing during the attempt/" + tt.name
				}
				t.Run(name, func(t *testing.T) {
					testCollectFollowUps(t, openStoreMode(t, t.TempDir(), mode.watch), tt, full)
				})
			}
		}
	}
}

// testCollectFollowUps plays one attempt on s and checks the collection.
// With full, the status call during the attempt makes a full listing.
func testCollectFollowUps(t *testing.T, s *Store, tt collectCase, full bool) {
	t.Helper()
	for _, f := range tt.preexist {
		write(t, filepath.Join(s.Dir(), f.path), f.content)
	}
	snap, err := s.SnapshotInbox()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range tt.written {
		write(t, filepath.Join(s.Dir(), f.path), f.content)
	}
	// A status call lists the inbox while the attempt runs: the
	// routine's files must reach the collection as it wrote them.
	if full {
		s.inbox.fullAt = time.Time{}
	}
	if _, err := s.ListInbox(); err != nil {
		t.Fatal(err)
	}
	got, err := s.CollectFollowUps(chainA, tt.seq, snap)
	if err != nil {
		t.Fatal(err)
	}
	var queued []string
	for _, f := range got.FollowUps {
		queued = append(queued, f.File)
		if !exists(filepath.Join(s.Dir(), "inbox", f.File)) {
			t.Errorf("%s reported queued but not in the inbox", f.File)
		}
	}
	if !slices.Equal(queued, tt.wantQueue) {
		t.Errorf("queued %v, want %v", queued, tt.wantQueue)
	}
	var dead []string
	for _, r := range got.Rejected {
		dead = append(dead, r.DeadFile)
		if r.Note.MessageID+".md" != r.DeadFile {
			t.Errorf("%s is dead-lettered as %s but has id %s", r.Source, r.DeadFile, r.Note.MessageID)
		}
		for _, f := range tt.written {
			if f.path == r.Source && read(t, filepath.Join(s.Dir(), "inbox/dead", r.DeadFile)) != f.content {
				t.Errorf("dead letter %s (from %s) not byte for byte", r.DeadFile, r.Source)
			}
		}
	}
	slices.Sort(dead)
	if !slices.Equal(dead, tt.wantDead) {
		t.Errorf("dead %v, want %v", dead, tt.wantDead)
	}
	for i, d := range tt.wantDead {
		note := read(t, filepath.Join(s.Dir(), "inbox/dead", d+layout.DeadNoteSuffix))
		if !strings.Contains(note, "reason: "+ReasonInvalidFollowUp) || !strings.Contains(note, tt.wantWhy[i]) {
			t.Errorf("note of %s lacks %q:\n%s", d, tt.wantWhy[i], note)
		}
	}
	ents, _ := os.ReadDir(filepath.Join(s.Dir(), "outbox"))
	var left []string
	for _, e := range ents {
		left = append(left, e.Name())
	}
	if !slices.Equal(left, tt.wantLeft) {
		t.Errorf("outbox left %v, want %v", left, tt.wantLeft)
	}
	// Queued outbox follow-ups are normalised to their new id.
	for _, f := range got.FollowUps {
		m, err := message.Parse([]byte(read(t, filepath.Join(s.Dir(), "inbox", f.File))))
		if err != nil {
			t.Fatal(err)
		}
		if err := message.Normalize(m, message.NormalizeInput{FileName: f.File}); err != nil {
			t.Errorf("%s does not normalise under its name: %v", f.File, err)
		}
		if m.ID() != f.ID {
			t.Errorf("%s has id %s, want %s", f.File, m.ID(), f.ID)
		}
	}
	for _, f := range tt.written {
		if f.path == "outbox/b-second.md" {
			m, _ := message.Parse([]byte(read(t, filepath.Join(s.Dir(), "inbox", chainA+"-2.md"))))
			if m.Routine() != "review" || string(m.Body) != "second\n" {
				t.Errorf("b-second.md lost its content: routine %q body %q", m.Routine(), m.Body)
			}
		}
	}
}

func TestReceiveFollowUp(t *testing.T) {
	tests := []struct {
		area, name string
		wantDead   bool
		wantPath   string
	}{
		{AreaInbox, chainA + "-1.md", false, "inbox/" + chainA + "-1.md"},
		{AreaInbox, "../x.md", true, ""},
		{AreaInbox, "../../etc/" + chainA + "-1.md", true, ""},
		{AreaInbox, chainB + "-5.md", true, ""},
		{AreaInbox, chainA + "-0.md", true, ""},
		{AreaOutbox, "note.md", false, "outbox/note.md"},
		{AreaOutbox, "../inbox/evil.md", true, ""},
		{AreaOutbox, "x.txt", true, ""},
		{AreaOutbox, "/abs.md", true, ""},
	}
	for _, tt := range tests {
		s := openStore(t, t.TempDir())
		rej, err := s.ReceiveFollowUp(chainA, 0, tt.area, tt.name, []byte("content\n"))
		if err != nil {
			t.Fatalf("%s %q: %v", tt.area, tt.name, err)
		}
		if (rej != nil) != tt.wantDead {
			t.Errorf("%s %q: rejected = %v, want %v", tt.area, tt.name, rej, tt.wantDead)
			continue
		}
		if rej != nil {
			if rej.DeadFile != chainA+"-1.md" || rej.Note.MessageID != chainA+"-1" || read(t, filepath.Join(s.Dir(), "inbox/dead", rej.DeadFile)) != "content\n" {
				t.Errorf("%q: dead file %q", tt.name, rej.DeadFile)
			}
			if !exists(filepath.Join(s.Dir(), "inbox/dead", rej.DeadFile+layout.DeadNoteSuffix)) {
				t.Errorf("%q: no note", tt.name)
			}
			// Nothing was written outside .decree/.
			if exists(filepath.Join(s.Root(), "x.md")) || exists(filepath.Join(s.Dir(), "inbox", "evil.md")) {
				t.Errorf("%q escaped", tt.name)
			}
			continue
		}
		if read(t, filepath.Join(s.Dir(), tt.wantPath)) != "content\n" {
			t.Errorf("%q not stored at %s", tt.name, tt.wantPath)
		}
	}
}

// A follow-up collected from the outbox keeps its outbox file name in its
// frontmatter (listings show it as the message's name).
func TestOutboxFollowUpKeepsItsName(t *testing.T) {
	st, err := Open(t.TempDir(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(st.Dir(), layout.Outbox, "write-summary.md"), []byte("summarise\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	before, err := st.SnapshotInbox()
	if err != nil {
		t.Fatal(err)
	}
	st.ReleaseSnapshot()
	col, err := st.CollectFollowUps("2026010100000000", 0, before)
	if err != nil || len(col.FollowUps) != 1 {
		t.Fatalf("collected %+v, %v", col, err)
	}
	m, err := message.ReadHeadFile(filepath.Join(st.Dir(), layout.Inbox, col.FollowUps[0].File))
	if err != nil {
		t.Fatal(err)
	}
	if got := m.GetString(message.OutboxFileField); got != "write-summary.md" {
		t.Errorf("outbox_file = %q, want write-summary.md", got)
	}
}
