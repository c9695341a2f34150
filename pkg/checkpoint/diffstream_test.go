package checkpoint

import (
	"bytes"
	"context"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/decreehq/decree/internal/testtool"
)

// TestDiffToMatchesDiff: for changes below StreamThreshold, DiffTo writes
// exactly what Diff returns.
func TestDiffToMatchesDiff(t *testing.T) {
	cp, root, before, diff := changedTree(t)
	var streamed bytes.Buffer
	if _, err := cp.DiffTo(context.Background(), root, before, &streamed); err != nil {
		t.Fatal(err)
	}
	if streamed.String() != string(diff) {
		t.Fatalf("DiffTo differs from Diff:\n%s\n---\n%s", streamed.String(), diff)
	}
}

// TestDiffToStreamsLargeFiles: files over StreamThreshold (new, modified,
// deleted, made executable, replaced by a symlink) become streamed binary
// patches, byte for byte what the in-memory writer produces for binary
// content, that git apply and Checkpointer.Revert accept.
func TestDiffToStreamsLargeFiles(t *testing.T) {
	cp := newCP(t)
	root := t.TempDir()
	r := rand.New(rand.NewSource(7))
	big := func() string {
		b := make([]byte, StreamThreshold+1<<20)
		r.Read(b)
		return string(b)
	}
	writeSpec(t, root, map[string]spec{
		"mod.bin": file(big()), "gone.bin": file(big()), "tool.bin": file(big()), "was-file": file(big()),
		"small.txt": file("small\n"),
	})
	before := snapshot(t, cp, root)
	state := treeState(t, root)
	pre := filepath.Join(t.TempDir(), "pre")
	copyTree(t, root, pre)
	writeSpec(t, root, map[string]spec{
		"mod.bin": file(big()), "new.bin": file(big()), "was-file": link("small.txt"), "small.txt": file("SMALL\n"),
	})
	os.Remove(filepath.Join(root, "gone.bin"))
	os.Chmod(filepath.Join(root, "tool.bin"), 0o755)

	var streamed bytes.Buffer
	after, err := cp.DiffTo(context.Background(), root, before, &streamed)
	if err != nil {
		t.Fatal(err)
	}
	// The in-memory writer gives the same bytes for binary content.
	var want bytes.Buffer
	for _, ch := range Compare(before, after) {
		old, err := cp.side(ch.Path, ch.Before, "")
		if err != nil {
			t.Fatal(err)
		}
		nw, err := cp.side(ch.Path, ch.After, "")
		if err != nil {
			t.Fatal(err)
		}
		WriteFileDiff(&want, ch.Path, old, nw)
	}
	if streamed.String() != want.String() {
		t.Fatalf("streamed diff (%d bytes) differs from the in-memory one (%d bytes)", streamed.Len(), want.Len())
	}
	if !strings.Contains(streamed.String(), "old mode 100644\nnew mode 100755\n") {
		t.Error("mode change missing")
	}
	testtool.Require(t, "git")
	diffPath := filepath.Join(t.TempDir(), "changes.diff")
	if err := os.WriteFile(diffPath, streamed.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := run(t, root, gitEnv(t), "git", "apply", "-R", "--check", diffPath); err != nil {
		t.Errorf("git apply -R --check rejects the streamed diff: %v\n%s", err, out)
	}
	if err := cp.Revert(context.Background(), root, streamed.Bytes(), before); err != nil {
		t.Fatal(err)
	}
	if got := treeState(t, root); got != state {
		t.Error("tree after reverting the streamed diff differs from the original")
	}
	if err := cp.Apply(context.Background(), pre, streamed.Bytes(), false, after); err != nil {
		t.Fatalf("forward apply of the streamed diff: %v", err)
	}
}
