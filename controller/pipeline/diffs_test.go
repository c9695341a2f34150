package pipeline

import (
	"context"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/decreehq/decree/controller/events"
	"github.com/decreehq/decree/controller/store"
	"github.com/decreehq/decree/internal/testtool"
	"github.com/decreehq/decree/pkg/checkpoint"
	"github.com/decreehq/decree/pkg/layout"
	"github.com/decreehq/decree/pkg/message"
)

// TestAttemptDiffsShareUnchangedContent: changes.diff is the latest
// attempt's diff file itself, an attempt whose diff equals an earlier one
// stores no second copy, and reverting (Restore) removes a large new file.
func TestAttemptDiffsShareUnchangedContent(t *testing.T) {
	st, err := store.Open(t.TempDir(), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	cp, err := checkpoint.New(checkpoint.Options{ObjectsDir: filepath.Join(st.Dir(), "objects"), NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	ev, err := events.Open(filepath.Join(st.Dir(), events.FileName), events.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer ev.Close()
	p := New(Deps{Store: st, Checkpoints: cp, Events: ev})
	e, err := st.CreateMessage("big", &message.Message{Body: []byte("work\n")})
	if err != nil {
		t.Fatal(err)
	}
	run, err := st.StartRun(store.RunStart{Entry: e, Routine: "develop", Trigger: "inbox", MaxAttempts: 3})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	root := st.Root()
	manifest, err := cp.Snapshot(ctx, root)
	if err != nil {
		t.Fatal(err)
	}
	big := make([]byte, checkpoint.StreamThreshold+1<<20)
	rand.New(rand.NewSource(1)).Read(big)
	if err := os.WriteFile(filepath.Join(root, "big.bin"), big, 0o644); err != nil {
		t.Fatal(err)
	}
	path := func(name string) string { p, _ := run.Path(name); return p }
	for n := 1; n <= 2; n++ { // attempt 2 leaves the tree as attempt 1 did
		if _, err := p.writeDiff(ctx, run, manifest, n); err != nil {
			t.Fatal(err)
		}
	}
	if testtool.Inode(t, path(layout.AttemptDiffName(1))) != testtool.Inode(t, path(layout.AttemptDiffName(2))) || testtool.Inode(t, path(layout.DiffFile)) != testtool.Inode(t, path(layout.AttemptDiffName(2))) {
		t.Fatal("equal attempt diffs and changes.diff are not one file")
	}
	if files := diffFiles(path(layout.DiffFile)); strings.Join(files, ",") != "big.bin" {
		t.Errorf("diffFiles = %v", files)
	}
	big[0] ^= 1
	if err := os.WriteFile(filepath.Join(root, "big.bin"), big, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := p.writeDiff(ctx, run, manifest, 3); err != nil {
		t.Fatal(err)
	}
	if testtool.Inode(t, path(layout.AttemptDiffName(3))) == testtool.Inode(t, path(layout.AttemptDiffName(1))) || testtool.Inode(t, path(layout.DiffFile)) != testtool.Inode(t, path(layout.AttemptDiffName(3))) {
		t.Fatal("a different diff was linked to an earlier one, or changes.diff is not the latest")
	}
	if err := p.revert(ctx, run, manifest); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "big.bin")); !os.IsNotExist(err) {
		t.Errorf("big.bin survived the revert: %v", err)
	}
}
