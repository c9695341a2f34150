package checkpoint

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/decreehq/decree/internal/testtool"
)

// TestDiffManifestsToGitApply diffs two snapshots from the store alone
// (the tree is deleted first) and applies the diff with git apply to a git
// checkout of the before tree: the result must be the after tree, byte for
// byte and mode for mode. The change has text edits, a permission-only
// change (644 -> 755), a binary edit, a file over StreamThreshold edited
// in place (streamed from the store as a delta), additions, a deletion,
// and symlink changes. The diff must also be the one DiffTo writes.
func TestDiffManifestsToGitApply(t *testing.T) {
	testtool.Require(t, "git")
	ctx := context.Background()
	cp := newCP(t)
	root := t.TempDir()
	large := bytes.Repeat([]byte("0123456789abcdef"), StreamThreshold/16+4096)
	writeSpec(t, root, map[string]spec{
		"src/a.txt":   file(lines40),
		"run.sh":      file("#!/bin/sh\necho hi\n"),
		"img.bin":     file("\x00\x01\x02 binary " + strings.Repeat("z", 500)),
		"gone.txt":    file("bye\n"),
		"link":        link("src/a.txt"),
		"big.dat":     file(string(large)),
		"crlf.txt":    file("a\r\nb\r\n"),
		"no-eol.txt":  file("one\ntwo"),
		"to-link.txt": file("becomes a link\n"),
	})
	before := snapshot(t, cp, root)
	checkout := t.TempDir()
	copyTree(t, root, checkout)
	env := gitEnv(t)
	for _, args := range [][]string{{"init", "-q"}, {"add", "-A"}, {"-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-qm", "before"}} {
		if out, err := run(t, checkout, env, "git", args...); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}

	large[StreamThreshold/2] = 'X'
	writeSpec(t, root, map[string]spec{
		"src/a.txt":      file(strings.Replace(lines40, "line 7\n", "line seven\n", 1) + "appended\n"),
		"run.sh":         exe("#!/bin/sh\necho hi\n"),
		"img.bin":        file("\x00\x01\x03 binary " + strings.Repeat("y", 400)),
		"link":           link("elsewhere"),
		"new/dir/n.txt":  file("new\n"),
		"new/empty":      file(""),
		"big.dat":        file(string(large)),
		"crlf.txt":       file("a\r\nB\r\n"),
		"no-eol.txt":     file("one\ntwo\nthree"),
		"to-link.txt":    link("src/a.txt"),
		"new/other.link": link("../run.sh"),
	})
	if err := os.Remove(filepath.Join(root, "gone.txt")); err != nil {
		t.Fatal(err)
	}
	want := treeState(t, root)
	var viaTree bytes.Buffer
	after, err := cp.DiffTo(ctx, root, before, &viaTree)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(root); err != nil {
		t.Fatal(err)
	}

	var diff bytes.Buffer
	if err := cp.DiffManifestsTo(ctx, before, after, &diff); err != nil {
		t.Fatal(err)
	}
	if diff.String() != viaTree.String() {
		t.Fatalf("DiffManifestsTo (%d bytes) differs from DiffTo (%d bytes)", diff.Len(), viaTree.Len())
	}
	for _, s := range []string{"old mode 100644\nnew mode 100755\n", "GIT binary patch\n", "delta "} {
		if !strings.Contains(diff.String(), s) {
			t.Errorf("diff lacks %q", s)
		}
	}
	if diff.Len() > 1<<20 {
		t.Errorf("diff is %d bytes: the large file's one-byte edit should be a small delta", diff.Len())
	}
	patch := filepath.Join(t.TempDir(), "change.diff")
	if err := os.WriteFile(patch, diff.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"apply", "--check", patch}, {"apply", patch}} {
		if out, err := run(t, checkout, env, "git", args...); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	if got := treeState(t, checkout); got != want {
		t.Errorf("git apply of DiffManifestsTo's diff gives another tree\ngot:\n%.2000s\nwant:\n%.2000s", got, want)
	}
	if out, err := run(t, checkout, env, "git", "apply", "-R", "--check", patch); err != nil {
		t.Errorf("git apply -R --check: %v\n%s", err, out)
	}
}

// TestDiffManifestsToEdges: nil manifests are empty trees, equal
// manifests give an empty diff, a missing content is ErrMissingBlob, and a
// cancelled context stops it.
func TestDiffManifestsToEdges(t *testing.T) {
	ctx := context.Background()
	cp := newCP(t)
	root := t.TempDir()
	writeSpec(t, root, map[string]spec{"a": file("a\n"), "x": exe("x\n")})
	m := snapshot(t, cp, root)
	var b bytes.Buffer
	if err := cp.DiffManifestsTo(ctx, m, m, &b); err != nil || b.Len() != 0 {
		t.Errorf("equal manifests: %q, %v", b.String(), err)
	}
	b.Reset()
	if err := cp.DiffManifestsTo(ctx, nil, m, &b); err != nil || !strings.Contains(b.String(), "new file mode 100755") || !strings.Contains(b.String(), "+a\n") {
		t.Errorf("from nothing: %q, %v", b.String(), err)
	}
	b.Reset()
	if err := cp.DiffManifestsTo(ctx, m, nil, &b); err != nil || !strings.Contains(b.String(), "deleted file mode 100644") {
		t.Errorf("to nothing: %q, %v", b.String(), err)
	}
	ghost := &Manifest{Files: map[string]Entry{"a": {SHA256: strings.Repeat("e", 64), Size: 3, Mode: ModeFile}}}
	if err := cp.DiffManifestsTo(ctx, m, ghost, &b); !errors.Is(err, ErrMissingBlob) {
		t.Errorf("missing content: %v, want ErrMissingBlob", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := cp.DiffManifestsTo(cctx, nil, m, &b); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}
}
