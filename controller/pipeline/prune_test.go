package pipeline

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"testing"

	"github.com/decreehq/decree/controller/store"
	"github.com/decreehq/decree/pkg/checkpoint"
	"github.com/decreehq/decree/pkg/layout"
	"github.com/decreehq/decree/pkg/message"
)

// Finished runs are pruned from the object store when the loop is idle (or
// every pruneEvery runs while busy): contents only a finished run
// saw go, while the current tree and every unfinished run's checkpoint stay,
// so that a revert of the finished message (from its changes.diff) and of
// the unfinished one (from its manifest) both still work.
func TestFinishedRunsPruneObjects(t *testing.T) {
	ctx := context.Background()
	st, cp, write := newTestProject(t)
	root := st.Root()
	read := func(name string) string {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(root, name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	start := func(name string) (*store.Run, *checkpoint.Manifest) {
		t.Helper()
		e, err := st.CreateMessage(name, &message.Message{Body: []byte("work\n")})
		if err != nil {
			t.Fatal(err)
		}
		run, err := st.StartRun(store.RunStart{Entry: e, Routine: "develop", MaxAttempts: 2})
		if err != nil {
			t.Fatal(err)
		}
		m, err := cp.Snapshot(ctx, root)
		if err != nil {
			t.Fatal(err)
		}
		mp, _ := run.Path(layout.ManifestFile)
		if err := checkpoint.WriteManifest(mp, m); err != nil {
			t.Fatal(err)
		}
		if _, err := run.BeginAttempt(); err != nil {
			t.Fatal(err)
		}
		return run, m
	}
	diff := func(before *checkpoint.Manifest) []byte {
		t.Helper()
		d, _, err := cp.Diff(ctx, root, before)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}

	write("a.txt", "a1\n")
	write("b.txt", "b1\n")
	write("c.txt", "c1\n")
	// A run whose state.json is damaged: its checkpoint (with c1) is kept.
	damaged, _ := start("damaged")
	if err := os.WriteFile(filepath.Join(damaged.Dir(), layout.StateFile), []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(root, "c.txt")); err != nil {
		t.Fatal(err)
	}
	// An attempt of another chain, interrupted by a restart: b1 is only
	// in its checkpoint.
	_, mWaiting := start("waiting")
	write("b.txt", "b2\n")
	diff(mWaiting)

	// The run that finishes: a failed attempt (its tree, with a-try1, is
	// stored by the diff and then reverted), then a successful one.
	run, m := start("finishing")
	write("a.txt", "a-try1\n")
	if err := cp.Revert(ctx, root, diff(m), m); err != nil {
		t.Fatal(err)
	}
	write("a.txt", "a2\n")
	changes := diff(m)
	if !cp.Store().Has(hashOf("a-try1\n")) || !cp.Store().Has(hashOf("a2\n")) {
		t.Fatal("setup: the attempts' contents are not in the store")
	}

	p := New(Deps{Store: st, Checkpoints: cp})
	p.finishRun(run, store.OutcomeSucceeded)
	// Busy with more messages, one finished run does not prune yet.
	p.pruneBusy(ctx)
	if !cp.Store().Has(hashOf("a-try1\n")) {
		t.Fatal("pruned after one finished run while busy; want every pruneEvery runs or when idle")
	}
	p.pruneIdle(ctx)

	if cp.Store().Has(hashOf("a-try1\n")) {
		t.Error("the contents of a finished run's failed attempt are still stored")
	}
	for _, keep := range []string{"a1\n", "a2\n", "b1\n", "b2\n", "c1\n"} {
		if !cp.Store().Has(hashOf(keep)) {
			t.Errorf("%q was pruned although the tree or an unfinished run needs it", keep)
		}
	}
	// The finished message reverts from its changes.diff alone.
	if err := cp.Revert(ctx, root, changes, m); err != nil {
		t.Fatalf("revert of the finished message after pruning: %v", err)
	}
	// The interrupted run reverts to its checkpoint, reading b1 from the store.
	if err := cp.Revert(ctx, root, diff(mWaiting), mWaiting); err != nil {
		t.Fatalf("revert of the unfinished run after pruning: %v", err)
	}
	if a, b := read("a.txt"), read("b.txt"); a != "a1\n" || b != "b1\n" {
		t.Errorf("after both reverts a.txt = %q, b.txt = %q; want a1, b1", a, b)
	}
}

// hashOf is the object-store key of data.
func hashOf(data string) string {
	sum := sha256.Sum256([]byte(data))
	return hex.EncodeToString(sum[:])
}

// newTestProject opens a store in a new directory with a checkpointer
// on it, and returns a function writing a file into its tree.
func newTestProject(t *testing.T) (*store.Store, *checkpoint.Checkpointer, func(name, data string)) {
	t.Helper()
	st, err := store.Open(t.TempDir(), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	cp, err := checkpoint.New(checkpoint.Options{ObjectsDir: filepath.Join(st.Dir(), "objects"), CachePath: filepath.Join(st.Dir(), "cache", "statcache"), NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	write := func(name, data string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(st.Root(), name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return st, cp, write
}
