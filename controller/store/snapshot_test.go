package store

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/decreehq/decree/internal/testtool"
	"github.com/decreehq/decree/pkg/layout"
	"github.com/decreehq/decree/pkg/message"
)

// queueNames writes n follow-up-shaped messages of chains of their own.
func queueNames(t *testing.T, s *Store, from, n int) []string {
	t.Helper()
	var names []string
	for i := from; i < from+n; i++ {
		name := fmt.Sprintf("20260101%08d-0.md", i)
		write(t, filepath.Join(s.Dir(), layout.Inbox, name), "queued\n")
		names = append(names, name)
	}
	return names
}

// recordSnapshot takes a snapshot and records it in a new run id.
func recordSnapshot(t *testing.T, s *Store, id string) (*Run, InboxSnapshot) {
	t.Helper()
	snap, err := s.SnapshotInbox()
	if err != nil {
		t.Fatal(err)
	}
	r := startRun(t, s, id)
	if err := r.RecordInboxSnapshot(snap); err != nil {
		t.Fatal(err)
	}
	return r, snap
}

// startRun opens a run directory for a snapshot to be recorded in.
func startRun(t *testing.T, s *Store, id string) *Run {
	t.Helper()
	m := &message.Message{Body: []byte("x\n")}
	r, err := s.StartRun(RunStart{Entry: Entry{File: id + ".md", ID: id, Message: m}, Routine: "develop", MaxAttempts: 1})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestSnapshotRecordedAsDifference: a snapshot of a long queue is written
// once as a base shared by hard link between runs; each run records only
// the names that changed since; read back, every snapshot holds exactly
// the names the inbox had, also after the base was replaced.
func TestSnapshotRecordedAsDifference(t *testing.T) {
	for _, mode := range storeModes {
		t.Run(mode.name, func(t *testing.T) {
			s := openStoreMode(t, t.TempDir(), mode.watch)
			queued := queueNames(t, s, 0, 600)
			write(t, filepath.Join(s.Dir(), layout.Inbox, "by-hand.md"), "not shaped like a follow-up\n")
			check := func(r *Run, want []string) {
				t.Helper()
				snap, ok := r.InboxSnapshot()
				if !ok {
					t.Fatalf("%s: no snapshot read back", r.ID())
				}
				if got := snap.Names(); !slices.Equal(got, want) {
					t.Errorf("%s: snapshot read back has %d names, want %d", r.ID(), len(got), len(want))
				}
			}
			r1, _ := recordSnapshot(t, s, "2025010100000000-0")
			check(r1, queued)
			base := filepath.Join(s.Dir(), layout.Runs, baseFile)
			if testtool.Inode(t, filepath.Join(r1.Dir(), layout.InboxBaseFile)) != testtool.Inode(t, base) {
				t.Errorf("the run's base is not a link to the store's")
			}
			// Three processed, two follow-ups: the next run records five lines.
			for _, n := range queued[:3] {
				if _, err := s.MarkDone(n); err != nil {
					t.Fatal(err)
				}
			}
			added := queueNames(t, s, 1000, 2)
			r2, snap2 := recordSnapshot(t, s, "2025010100000001-0")
			want2 := slices.Sorted(slices.Values(append(append([]string(nil), queued[3:]...), added...)))
			check(r2, want2)
			b, err := os.ReadFile(filepath.Join(r2.Dir(), layout.InboxBeforeFile))
			if err != nil {
				t.Fatal(err)
			}
			if lines := strings.Split(strings.TrimSpace(string(b)), "\n"); len(lines) != 1+5 {
				t.Errorf("inbox-before.txt has %d lines, want a header and 5 changes:\n%s", len(lines), b)
			}
			if testtool.Inode(t, filepath.Join(r2.Dir(), layout.InboxBaseFile)) != testtool.Inode(t, filepath.Join(r1.Dir(), layout.InboxBaseFile)) {
				t.Errorf("the second run does not share the first run's base")
			}
			// Enough changes for a new base: the old runs still read theirs.
			more := queueNames(t, s, 2000, 300)
			r3, _ := recordSnapshot(t, s, "2025010100000002-0")
			if testtool.Inode(t, filepath.Join(r3.Dir(), layout.InboxBaseFile)) == testtool.Inode(t, filepath.Join(r1.Dir(), layout.InboxBaseFile)) {
				t.Errorf("no new base after 300 changes")
			}
			check(r3, slices.Sorted(slices.Values(append(append([]string(nil), want2...), more...))))
			check(r1, queued)
			check(r2, want2)
			// The live snapshot answers as the recorded one.
			for _, n := range []string{queued[0], queued[5], added[0], more[0], "by-hand.md"} {
				if rec, _ := r2.InboxSnapshot(); rec.Has(n) != snap2.Has(n) {
					t.Errorf("%s: recorded snapshot says %v, live one %v", n, rec.Has(n), snap2.Has(n))
				}
			}
		})
	}
}

// TestSnapshotOldFormat: a run recorded by an older version (one name per
// line) is still read.
func TestSnapshotOldFormat(t *testing.T) {
	s := openStore(t, t.TempDir())
	r := startRun(t, s, "2025010100000000-0")
	if err := os.WriteFile(filepath.Join(r.Dir(), layout.InboxBeforeFile), []byte("2026010100000000-0.md\n2026010100000001-3.md"), 0o644); err != nil {
		t.Fatal(err)
	}
	snap, ok := r.InboxSnapshot()
	if !ok || !snap.Has("2026010100000001-3.md") || !snap.Has("2026010100000000-0.md") || snap.Has("2026010100000002-0.md") {
		t.Errorf("old format read as %v (ok %v)", snap.Names(), ok)
	}
}

// TestSnapshotNeedsItsBase: a difference without its base is not a
// snapshot (a damaged run directory), rather than an empty one.
func TestSnapshotNeedsItsBase(t *testing.T) {
	s := openStore(t, t.TempDir())
	queueNames(t, s, 0, 3)
	r, _ := recordSnapshot(t, s, "2025010100000000-0")
	if err := os.Remove(filepath.Join(r.Dir(), layout.InboxBaseFile)); err != nil {
		t.Fatal(err)
	}
	if _, ok := r.InboxSnapshot(); ok {
		t.Errorf("a snapshot without its base was read")
	}
}

// TestRequeueDuringAttemptIsNoFollowUp: a dead message of another chain
// requeued by a client while an attempt runs is queued, not taken for a
// follow-up the routine wrote for a foreign chain.
func TestRequeueDuringAttemptIsNoFollowUp(t *testing.T) {
	for _, mode := range storeModes {
		t.Run(mode.name, func(t *testing.T) {
			s := openStoreMode(t, t.TempDir(), mode.watch)
			name := chainB + "-0.md"
			write(t, filepath.Join(s.Dir(), layout.Dead, name), "failed once\n")
			snap, err := s.SnapshotInbox()
			if err != nil {
				t.Fatal(err)
			}
			if _, err := s.Requeue(name); err != nil {
				t.Fatal(err)
			}
			col, err := s.CollectFollowUps(chainA, 0, snap)
			if err != nil {
				t.Fatal(err)
			}
			if len(col.Rejected) != 0 || len(col.FollowUps) != 0 {
				t.Errorf("the requeued message was collected: %+v", col)
			}
			if !exists(filepath.Join(s.Dir(), layout.Inbox, name)) {
				t.Errorf("the requeued message left the inbox")
			}
		})
	}
}

// TestFollowUpShapedNameWaitsForCollection: a file shaped like a
// follow-up but without a chain id, dropped while an attempt runs, is not
// given a chain (written back) until the attempt's follow-ups are settled:
// the collection must see it as it was written. Afterwards it is an
// ordinary message with a chain of its own.
func TestFollowUpShapedNameWaitsForCollection(t *testing.T) {
	for _, mode := range storeModes {
		t.Run(mode.name, func(t *testing.T) {
			s := openStoreMode(t, t.TempDir(), mode.watch)
			if _, err := s.SnapshotInbox(); err != nil {
				t.Fatal(err)
			}
			p := filepath.Join(s.Dir(), layout.Inbox, "2024-01.md")
			write(t, p, "january\n")
			if got := inboxFiles(t, s); len(got) != 0 {
				t.Errorf("listed during the attempt: %v", got)
			}
			if read(t, p) != "january\n" {
				t.Errorf("rewritten during the attempt: %q", read(t, p))
			}
			s.ReleaseSnapshot()
			es, err := s.ListInbox()
			if err != nil || len(es) != 1 || es[0].Err != nil || es[0].Chain == "" {
				t.Fatalf("after the attempt: %+v %v", es, err)
			}
			if !strings.Contains(read(t, p), "chain: "+es[0].Chain) {
				t.Errorf("its chain was not written back:\n%s", read(t, p))
			}
		})
	}
}

// TestSnapshotBaseRemovedByHand: the store's base file removed (or
// replaced) between attempts is written again, not an error at every
// attempt from then on.
func TestSnapshotBaseRemovedByHand(t *testing.T) {
	s := openStoreMode(t, t.TempDir(), true)
	queued := queueNames(t, s, 0, 5)
	recordSnapshot(t, s, "2025010100000000-0")
	if err := os.Remove(filepath.Join(s.Dir(), layout.Runs, baseFile)); err != nil {
		t.Fatal(err)
	}
	r, _ := recordSnapshot(t, s, "2025010100000001-0")
	snap, ok := r.InboxSnapshot()
	if !ok || !slices.Equal(snap.Names(), queued) {
		t.Errorf("after the base was removed: %v (ok %v), want %v", snap.Names(), ok, queued)
	}
}
