package store

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/decreehq/decree/pkg/layout"
	"github.com/decreehq/decree/pkg/message"
)

// bigBody is a body that would confuse a careless copy: it starts with a
// "---" line, holds more "---" lines, CRLF and binary bytes, and is larger
// than any buffer on the way.
func bigBody() []byte {
	var b bytes.Buffer
	b.WriteString("---\nnot: frontmatter\n---\r\n")
	for i := 0; b.Len() < 3<<20; i++ {
		b.Write([]byte{byte(i), 0, 0xff, '\n', '-', '-', '-', '\n'})
	}
	return b.Bytes()
}

// A large message keeps its body byte for byte through every rewrite the
// store makes (a new message, the chain id written back into a dropped
// file, a renumbered follow-up, the copy into runs/<id>/message.md), while
// entries, listings and views carry the frontmatter only.
func TestBodiesStreamedNeverHeld(t *testing.T) {
	root := t.TempDir()
	s := openStore(t, root)
	body := bigBody()

	created, err := s.CreateMessageFrom("created", &message.Message{Fields: []message.Field{{Key: "routine", Value: "develop"}}}, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	// Dropped in by hand without a chain: the store writes one back.
	dropped := append([]byte("---\nroutine: develop\n---\n"), body...)
	if err := os.WriteFile(filepath.Join(s.Dir(), "inbox", "dropped.md"), dropped, 0o644); err != nil {
		t.Fatal(err)
	}
	es, err := s.ListInbox()
	if err != nil || len(es) != 2 {
		t.Fatalf("ListInbox: %v %v", es, err)
	}
	for _, e := range es {
		if e.Err != nil {
			t.Fatalf("%s: %v", e.File, e.Err)
		}
		if e.Message.Body != nil {
			t.Errorf("inbox entry %s holds a body of %d bytes; entries carry the frontmatter only", e.File, len(e.Message.Body))
		}
		onDisk, err := message.Parse([]byte(read(t, filepath.Join(s.Dir(), "inbox", e.File))))
		if err != nil {
			t.Fatal(err)
		}
		if onDisk.ID() != e.ID || onDisk.Routine() != "develop" || !bytes.Equal(onDisk.Body, body) {
			t.Errorf("%s on disk: id %q (entry %q), routine %q, body intact %v", e.File, onDisk.ID(), e.ID, onDisk.Routine(), bytes.Equal(onDisk.Body, body))
		}
		// The run directory gets the entry's frontmatter and the body.
		e.Message.Set("routine", "other")
		r, err := s.StartRun(RunStart{Entry: e, Routine: "other", MaxAttempts: 1})
		if err != nil {
			t.Fatal(err)
		}
		inRun, err := message.Parse([]byte(read(t, filepath.Join(r.Dir(), layout.MessageFile))))
		if err != nil {
			t.Fatal(err)
		}
		if inRun.ID() != e.ID || inRun.Routine() != "other" || !bytes.Equal(inRun.Body, body) {
			t.Errorf("%s message.md: id %q, routine %q, body intact %v", e.File, inRun.ID(), inRun.Routine(), bytes.Equal(inRun.Body, body))
		}
		// The body reads back as a stream, with its size.
		b, err := s.OpenBody(MessageView{Name: e.Name(), State: StateQueued})
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(b)
		b.Close()
		if !bytes.Equal(got, body) || b.Size != int64(len(body)) {
			t.Errorf("OpenBody of %s: %d bytes (size %d), want the body of %d", e.File, len(got), b.Size, len(body))
		}
	}
	if created.Message.Body != nil {
		t.Error("CreateMessageFrom returned an entry holding the body")
	}
	// Done and dead messages are listed from their frontmatter.
	if _, err := s.MarkDone(created.File); err != nil {
		t.Fatal(err)
	}
	if _, err := s.DeadLetter("dropped.md", DeadNote{Reason: "Test"}); err != nil {
		t.Fatal(err)
	}
	vs, err := s.Messages()
	if err != nil || len(vs) != 2 {
		t.Fatalf("Messages: %v %v", vs, err)
	}
	for _, v := range vs {
		if v.Message == nil || v.Message.Body != nil || v.Message.Routine() != "develop" || v.ID == "" {
			t.Errorf("view %s: %+v; want its frontmatter and id, no body", v.Name, v.Message)
		}
	}
}

// A follow-up written to the outbox is renumbered into the inbox with its
// body byte for byte.
func TestFollowUpBodyKept(t *testing.T) {
	root := t.TempDir()
	s := openStore(t, root)
	body := bigBody()
	e, err := s.CreateMessage("root", &message.Message{Body: []byte("root")})
	if err != nil {
		t.Fatal(err)
	}
	before, err := s.SnapshotInbox()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(s.Dir(), "outbox", "next.md"), append([]byte("---\nroutine: develop\n---\n"), body...), 0o644); err != nil {
		t.Fatal(err)
	}
	col, err := s.CollectFollowUps(e.Chain, e.Seq, before)
	if err != nil || len(col.FollowUps) != 1 {
		t.Fatalf("CollectFollowUps: %+v %v", col, err)
	}
	m, err := message.Parse([]byte(read(t, filepath.Join(s.Dir(), "inbox", col.FollowUps[0].File))))
	if err != nil || m.Chain() != e.Chain || !bytes.Equal(m.Body, body) || !strings.HasSuffix(col.FollowUps[0].File, "-1.md") {
		t.Errorf("follow-up %s: chain %q (want %s), body intact %v, %v", col.FollowUps[0].File, m.Chain(), e.Chain, bytes.Equal(m.Body, body), err)
	}
}
