package sched

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/decreehq/decree/controller/store"
	"github.com/decreehq/decree/pkg/layout"
)

const (
	c1 = "2025010100000000"
	c2 = "2025010100000001"
	c3 = "2025010100000002"
)

// TestPickFrom: entries come in the store's processing order (chain, seq,
// file; unusable last); the current chain wins, else the first accepted.
func TestPickFrom(t *testing.T) {
	e := func(chain string, seq int, file string) store.Entry {
		return store.Entry{File: file, Chain: chain, Seq: seq, ID: chain}
	}
	all := func(*store.Entry) bool { return true }
	tests := []struct {
		name    string
		entries []store.Entry
		current string
		ok      func(*store.Entry) bool
		want    string
	}{
		{"empty", nil, "", all, ""},
		{"oldest chain first", []store.Entry{e(c1, 1, "a"), e(c2, 0, "b")}, "", all, "a"},
		{"current chain beats older chains", []store.Entry{e(c1, 0, "old"), e(c2, 5, "cur"), e(c2, 6, "next")}, c2, all, "cur"},
		{"current chain gone: oldest", []store.Entry{e(c2, 0, "m"), e(c3, 0, "n")}, c1, all, "m"},
		{"bad entries never picked", []store.Entry{{File: "bad", Err: errors.New("x")}}, "", all, ""},
		{"refused entries skipped", []store.Entry{e(c1, 0, "a"), e(c2, 0, "b")}, c1, func(e *store.Entry) bool { return e.File != "a" }, "b"},
	}
	for _, tt := range tests {
		i := pickFrom(tt.entries, tt.current, tt.ok)
		got := ""
		if i >= 0 {
			got = tt.entries[i].File
		}
		if got != tt.want {
			t.Errorf("%s: picked %q, want %q", tt.name, got, tt.want)
		}
	}
}

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestDepthFirstAcrossChains plays a processing loop: every message
// processed may spawn follow-ups, and the order must finish a chain (deepest
// spawns included) before the next chain starts.
func TestDepthFirstAcrossChains(t *testing.T) {
	st, err := store.Open(t.TempDir(), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	inbox := filepath.Join(st.Dir(), "inbox")
	write(t, filepath.Join(inbox, c2+"-0.md"), "chain 2 root\n")
	write(t, filepath.Join(inbox, c1+"-0.md"), "chain 1 root\n")
	write(t, filepath.Join(inbox, c3+"-0.md"), "chain 3 root\n")
	// spawns: processing id X writes these follow-ups of its own chain.
	spawns := map[string][]string{
		c1 + "-0": {c1 + "-1", c1 + "-2"},
		c1 + "-1": {c1 + "-3"},
		c2 + "-0": {c2 + "-1"},
	}
	s := New(st, Options{MaxDepth: 10})
	var order, finished []string
	for {
		sel, err := s.Next(NextOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if sel.FinishedChain != "" {
			finished = append(finished, sel.FinishedChain)
		}
		if !sel.Found {
			break
		}
		id := sel.Entry.ID
		order = append(order, id)
		if _, err := s.Next(NextOptions{}); !errors.Is(err, ErrBusy) {
			t.Fatalf("second Next while %s runs: %v, want ErrBusy", id, err)
		}
		for _, f := range spawns[id] {
			write(t, filepath.Join(inbox, f+".md"), "follow-up\n")
		}
		if _, err := st.MarkDone(sel.Entry.File); err != nil {
			t.Fatal(err)
		}
		if err := s.Finish(id); err != nil {
			t.Fatal(err)
		}
	}
	want := []string{c1 + "-0", c1 + "-1", c1 + "-2", c1 + "-3", c2 + "-0", c2 + "-1", c3 + "-0"}
	if !slices.Equal(order, want) {
		t.Errorf("order %v\nwant  %v", order, want)
	}
	if !slices.Equal(finished, []string{c1, c2, c3}) {
		t.Errorf("finished chains %v", finished)
	}
}

func TestMaxDepthAndBadFilesAreDeadLettered(t *testing.T) {
	st, err := store.Open(t.TempDir(), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	inbox := filepath.Join(st.Dir(), "inbox")
	write(t, filepath.Join(inbox, c1+"-3.md"), "too deep\n")
	write(t, filepath.Join(inbox, c1+"-2.md"), "just fits\n")
	write(t, filepath.Join(inbox, "broken.md"), "---\nunclosed: [\n")
	write(t, filepath.Join(inbox, c2+"-0.md"), "other chain\n")
	s := New(st, Options{MaxDepth: 3})

	sel, err := s.Next(NextOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !sel.Found || sel.Entry.ID != c1+"-2" {
		t.Fatalf("selected %+v", sel.Entry)
	}
	if len(sel.Rejected) != 1 || sel.Rejected[0].File != "broken.md" || sel.Rejected[0].Note.Reason != store.ReasonInvalidMessage {
		t.Fatalf("rejected %+v", sel.Rejected)
	}
	st.MarkDone(sel.Entry.File)
	s.Finish(sel.Entry.ID)

	sel, err = s.Next(NextOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !sel.Found || sel.Entry.ID != c2+"-0" || sel.FinishedChain != c1 {
		t.Fatalf("selected %+v finished %q", sel.Entry, sel.FinishedChain)
	}
	if len(sel.Rejected) != 1 || sel.Rejected[0].ID != c1+"-3" || sel.Rejected[0].Note.Reason != store.ReasonMaxDepthExceeded {
		t.Fatalf("rejected %+v", sel.Rejected)
	}
	note, err := os.ReadFile(filepath.Join(st.Dir(), "inbox/dead", c1+"-3.md"+layout.DeadNoteSuffix))
	if err != nil || !strings.Contains(string(note), "MaxDepthExceeded") || !strings.Contains(string(note), "max_depth is 3") {
		t.Errorf("note %q, %v", note, err)
	}
	if b, _ := os.ReadFile(filepath.Join(st.Dir(), "inbox/dead/broken.md")); string(b) != "---\nunclosed: [\n" {
		t.Errorf("broken.md not kept byte for byte: %q", b)
	}
}

func TestOnlyChain(t *testing.T) {
	st, err := store.Open(t.TempDir(), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	inbox := filepath.Join(st.Dir(), "inbox")
	write(t, filepath.Join(inbox, c1+"-0.md"), "older chain\n")
	write(t, filepath.Join(inbox, c2+"-0.md"), "mine\n")
	s := New(st, Options{})
	sel, err := s.Next(NextOptions{OnlyChain: c2})
	if err != nil || !sel.Found || sel.Entry.ID != c2+"-0" {
		t.Fatalf("%+v %v", sel, err)
	}
	st.MarkDone(sel.Entry.File)
	s.Finish(sel.Entry.ID)
	sel, err = s.Next(NextOptions{OnlyChain: c2})
	if err != nil || sel.Found || sel.FinishedChain != c2 {
		t.Fatalf("%+v %v", sel, err)
	}
}

// TestExcludeLeavesAWaitingChain: a chain whose message waits for a reply
// (excluded) is left queued and untouched, also when it is the current
// chain; the next chain is picked, and the excluded one resumes first once
// let go (depth-first order kept).
func TestExcludeLeavesAWaitingChain(t *testing.T) {
	st, err := store.Open(t.TempDir(), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	inbox := filepath.Join(st.Dir(), "inbox")
	write(t, filepath.Join(inbox, c1+"-0.md"), "asks\n")
	write(t, filepath.Join(inbox, c1+"-1.md"), "its follow-up\n")
	write(t, filepath.Join(inbox, c2+"-0.md"), "another chain\n")
	write(t, filepath.Join(inbox, c3+"-0.md"), "a third\n")
	s := New(st, Options{})
	sel, err := s.Next(NextOptions{})
	if err != nil || sel.Entry.ID != c1+"-0" {
		t.Fatalf("%+v %v", sel, err)
	}
	s.Finish(sel.Entry.ID) // it now waits, still in the inbox
	waiting := map[string]bool{c1: true}
	exclude := func(c string) bool { return waiting[c] }
	sel, err = s.Next(NextOptions{Exclude: exclude})
	if err != nil || sel.Entry.ID != c2+"-0" {
		t.Fatalf("picked %+v %v, want the next chain", sel.Entry.ID, err)
	}
	st.MarkDone(sel.Entry.File)
	s.Finish(sel.Entry.ID)
	waiting[c1] = false // replied
	sel, err = s.Next(NextOptions{Exclude: exclude})
	if err != nil || sel.Entry.ID != c1+"-0" {
		t.Fatalf("picked %+v %v, want the answered chain before the third", sel.Entry.ID, err)
	}
	if got, _ := os.ReadDir(inbox); len(got) < 4 {
		t.Errorf("inbox lost files: %d", len(got))
	}
}
