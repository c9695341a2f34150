package checkpoint

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/decreehq/decree/pkg/fsutil"
)

// changedTree returns a checkpointer, a tree, its manifest before a change
// of several kinds, and the diff of that change.
func changedTree(t *testing.T) (*Checkpointer, string, *Manifest, []byte) {
	t.Helper()
	cp := newCP(t)
	root := t.TempDir()
	writeSpec(t, root, map[string]spec{
		"a.txt": file(lines40), "b.txt": file("b\n"), "gone.txt": file("bye\n"), "bin": file("\x00\x01"),
		"keep/x": file("x\n"),
	})
	before := snapshot(t, cp, root)
	writeSpec(t, root, map[string]spec{
		"a.txt": file(strings.Replace(lines40, "line 7\n", "seven\n", 1)), "b.txt": exe("B\n"),
		"new/file.txt": file("new\n"), "bin": file("\x00\x02\x03"),
	})
	os.Remove(filepath.Join(root, "gone.txt"))
	diff, _, err := cp.Diff(context.Background(), root, before)
	if err != nil {
		t.Fatal(err)
	}
	return cp, root, before, diff
}

// TestRevertRejectsCorruptDiffs cuts a real diff at many points and damages
// it in other ways: every attempt must fail and leave the tree untouched.
func TestRevertRejectsCorruptDiffs(t *testing.T) {
	cp, root, before, diff := changedTree(t)
	state := treeState(t, root)
	var bad [][]byte
	// (Dropping only the final newline leaves an equivalent diff.)
	for cut := 1; cut < len(diff)-1; cut += 7 {
		bad = append(bad, diff[:cut])
	}
	flip := []byte(strings.Replace(string(diff), "-line 7", "-line 8", 1))
	// Damage the base85 data of the binary hunk a revert uses.
	damaged := []byte(string(diff))
	at := strings.Index(string(damaged), "literal 2\n") + len("literal 2\n") + 3
	damaged[at] ^= 1
	bad = append(bad, flip, []byte("this is not a diff\n"), damaged)
	for i, d := range bad {
		err := cp.Revert(context.Background(), root, d, before)
		if err == nil {
			t.Fatalf("case %d (%d bytes): corrupt diff accepted:\n%s", i, len(d), d)
		}
		if got := treeState(t, root); got != state {
			t.Fatalf("case %d: tree changed by a failed revert (%v)", i, err)
		}
	}
	// The intact diff still reverts.
	if err := cp.Revert(context.Background(), root, diff, before); err != nil {
		t.Fatal(err)
	}
}

func TestRevertDetectsExternalChanges(t *testing.T) {
	tests := []struct {
		name   string
		change func(root string)
		want   []string
	}{
		{"touched file edited", func(root string) {
			os.WriteFile(filepath.Join(root, "a.txt"), []byte("edited\n"), 0o644)
		}, []string{"a.txt"}},
		{"two files edited", func(root string) {
			os.WriteFile(filepath.Join(root, "new/file.txt"), []byte("other\n"), 0o644)
			os.WriteFile(filepath.Join(root, "keep/x"), []byte("y\n"), 0o644)
		}, []string{"new/file.txt"}},
		{"untouched file edited", func(root string) {
			os.WriteFile(filepath.Join(root, "keep/x"), []byte("y\n"), 0o644)
		}, []string{"keep/x"}},
		{"mode changed", func(root string) {
			os.Chmod(filepath.Join(root, "b.txt"), 0o644)
		}, []string{"b.txt"}},
		{"file added outside", func(root string) {
			os.WriteFile(filepath.Join(root, "stray"), []byte("s\n"), 0o644)
		}, []string{"stray"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cp, root, before, diff := changedTree(t)
			tt.change(root)
			state := treeState(t, root)
			err := cp.Revert(context.Background(), root, diff, before)
			if !errors.Is(err, ErrConflict) {
				t.Fatalf("Revert error %v, want ErrConflict", err)
			}
			for _, p := range tt.want {
				if !strings.Contains(err.Error(), p) {
					t.Errorf("error does not name %s: %v", p, err)
				}
			}
			if got := treeState(t, root); got != state {
				t.Fatal("tree changed by a failed revert")
			}
		})
	}
}

func TestApplyConfinesPaths(t *testing.T) {
	outside := t.TempDir()
	newFile := func(name string) string {
		return "diff --git a/" + name + " b/" + name + "\nnew file mode 100644\n--- /dev/null\n+++ b/" + name + "\n@@ -0,0 +1 @@\n+pwned\n"
	}
	tests := []struct{ name, diff string }{
		{"dotdot", newFile("../escape")},
		{"dotdot-inner", newFile("a/../../escape")},
		{"absolute", "--- /dev/null\n+++ " + outside + "/x\n@@ -0,0 +1 @@\n+pwned\n"},
		{"through-symlink", newFile("out/x")},
		{"through-inner-symlink", newFile("in/x")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			os.Symlink(outside, filepath.Join(root, "out"))
			os.Mkdir(filepath.Join(root, "real"), 0o755)
			os.Symlink("real", filepath.Join(root, "in"))
			state := treeState(t, root)
			cp := newCP(t)
			err := cp.Apply(context.Background(), root, []byte(tt.diff), false, nil)
			if err == nil {
				t.Fatal("escaping diff applied")
			}
			if !errors.Is(err, fsutil.ErrUnsafePath) && !errors.Is(err, ErrCorruptDiff) {
				t.Fatalf("error %v is neither ErrUnsafePath nor ErrCorruptDiff", err)
			}
			if treeState(t, root) != state {
				t.Fatal("tree changed")
			}
			entries, _ := os.ReadDir(outside)
			if len(entries) != 0 || fileExists(filepath.Join(filepath.Dir(root), "escape")) {
				t.Fatal("file written outside the root")
			}
		})
	}
}

func fileExists(p string) bool { _, err := os.Lstat(p); return err == nil }

// TestSymlinkOutOfTreeRoundTrip: a link to outside the tree is recorded and
// restored as a link and never followed.
func TestSymlinkOutOfTreeRoundTrip(t *testing.T) {
	outside := t.TempDir()
	os.WriteFile(filepath.Join(outside, "secret"), []byte("s\n"), 0o644)
	cp := newCP(t)
	root := t.TempDir()
	os.Symlink(outside, filepath.Join(root, "ext"))
	before := snapshot(t, cp, root)
	if len(before.Files) != 1 || before.Files["ext"].Link != outside {
		t.Fatalf("manifest %+v: want only the link itself", before.Files)
	}
	os.Remove(filepath.Join(root, "ext"))
	os.Symlink("/nowhere", filepath.Join(root, "ext"))
	diff, _, err := cp.Diff(context.Background(), root, before)
	if err != nil {
		t.Fatal(err)
	}
	if err := cp.Revert(context.Background(), root, diff, before); err != nil {
		t.Fatal(err)
	}
	if l, _ := os.Readlink(filepath.Join(root, "ext")); l != outside {
		t.Fatalf("link restored to %q", l)
	}
	if b, _ := os.ReadFile(filepath.Join(outside, "secret")); string(b) != "s\n" {
		t.Fatal("file outside the tree touched")
	}
}

// TestApplyIsIdempotent: an Apply interrupted after writing some files can
// be run again; a path already in its final state is accepted.
func TestApplyIsIdempotent(t *testing.T) {
	cp, root, before, diff := changedTree(t)
	// Simulate a crash after part of a revert: put two files back by hand.
	os.WriteFile(filepath.Join(root, "a.txt"), []byte(lines40), 0o644)
	os.RemoveAll(filepath.Join(root, "new"))
	if err := cp.Revert(context.Background(), root, diff, before); err != nil {
		t.Fatal(err)
	}
	if m := snapshot(t, cp, root); !m.Equal(before) {
		t.Fatal("tree differs from the manifest")
	}
	if err := cp.Revert(context.Background(), root, diff, before); err != nil {
		t.Fatalf("second revert: %v", err)
	}
}

func TestUnreadableFile(t *testing.T) {
	if os.Getenv("DECREE_UNREADABLE_HELPER") != "" {
		cp, err := New(Options{ObjectsDir: filepath.Join(os.Getenv("DECREE_UNREADABLE_HELPER"), "obj"), NoSync: true})
		if err == nil {
			_, err = cp.Snapshot(context.Background(), filepath.Join(os.Getenv("DECREE_UNREADABLE_HELPER"), "tree"))
		}
		if err != nil {
			os.Stdout.WriteString("ERR: " + err.Error())
		}
		return
	}
	base, err := os.MkdirTemp("", "decree-unreadable-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(base)
	os.Chmod(base, 0o777)
	tree := filepath.Join(base, "tree")
	os.Mkdir(tree, 0o777)
	os.WriteFile(filepath.Join(tree, "ok"), []byte("ok\n"), 0o644)
	os.WriteFile(filepath.Join(tree, "locked"), []byte("no\n"), 0o000)
	os.Mkdir(filepath.Join(base, "obj"), 0o777)
	os.Chmod(filepath.Join(base, "obj"), 0o777)
	os.Chmod(tree, 0o777)
	var out []byte
	if os.Geteuid() == 0 {
		// root reads anything: run the snapshot as nobody.
		// The test binary's own directory is private: copy it.
		bin := filepath.Join(base, "checkpoint.test")
		data, err := os.ReadFile(os.Args[0])
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(bin, data, 0o755); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(bin, "-test.run=^TestUnreadableFile$")
		cmd.Env = append(os.Environ(), "DECREE_UNREADABLE_HELPER="+base)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
		out, err = cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("helper: %v\n%s", err, out)
		}
	} else {
		cp := newCP(t)
		_, err := cp.Snapshot(context.Background(), tree)
		if err != nil {
			out = []byte("ERR: " + err.Error())
		}
	}
	msg := string(out)
	if !strings.Contains(msg, "ERR: ") || !strings.Contains(msg, "locked") || !strings.Contains(msg, "permission denied") || !strings.Contains(msg, ".decreeignore") {
		t.Fatalf("want an error naming the file, the cause and the remedy; got %q", msg)
	}
}

// TestTrackedFilesStayTracked: a routine that adds tracked files to
// .gitignore (and edits one) must not make them look deleted, and the
// revert must restore everything, .gitignore included.
func TestTrackedFilesStayTracked(t *testing.T) {
	cp := newCP(t)
	root := t.TempDir()
	writeSpec(t, root, map[string]spec{"app.log": file("one\n"), "quiet.log": file("q\n"), "main.go": file("m\n")})
	before := snapshot(t, cp, root)
	state := treeState(t, root)
	writeSpec(t, root, map[string]spec{".gitignore": file("*.log\n"), "app.log": file("one\ntwo\n"), "new.log": file("n\n")})
	diff, after, err := cp.Diff(context.Background(), root, before)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(diff), "deleted file") {
		t.Fatalf("ignored tracked files shown as deleted:\n%s", diff)
	}
	if _, ok := after.Files["quiet.log"]; !ok {
		t.Fatal("tracked file dropped from the manifest once ignored")
	}
	if _, ok := after.Files["new.log"]; ok {
		t.Fatal("new ignored file tracked")
	}
	os.Remove(filepath.Join(root, "new.log")) // untracked and ignored: not decree's to restore
	if err := cp.Revert(context.Background(), root, diff, before); err != nil {
		t.Fatal(err)
	}
	if got := treeState(t, root); got != state {
		t.Fatalf("revert: got %q, want %q", got, state)
	}
}

// TestRevertRestoresDeletedFilesWithTheirMode deletes files of both modes,
// text and binary, and reverts: each must come back with its content and
// exactly the permission its mode is created with.
func TestRevertRestoresDeletedFilesWithTheirMode(t *testing.T) {
	cp := newCP(t)
	root := t.TempDir()
	files := map[string]spec{
		"docs/notes.txt": file("notes\n"), "docs/blob.bin": file("\x00\x01\x02"),
		"run.sh": exe("#!/bin/sh\necho hi\n"), "tool.bin": exe("\x7fELF\x00\x01"),
	}
	writeSpec(t, root, files)
	before := snapshot(t, cp, root)
	state := treeState(t, root)
	for p := range files {
		if err := os.Remove(filepath.Join(root, filepath.FromSlash(p))); err != nil {
			t.Fatal(err)
		}
	}
	diff, _, err := cp.Diff(context.Background(), root, before)
	if err != nil {
		t.Fatal(err)
	}
	if err := cp.Revert(context.Background(), root, diff, before); err != nil {
		t.Fatal(err)
	}
	if got := treeState(t, root); got != state {
		t.Fatalf("reverted tree differs\nwant %q\ngot  %q", state, got)
	}
	for p, s := range files {
		fi, err := os.Stat(filepath.Join(root, filepath.FromSlash(p)))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != s.mode.Perm() {
			t.Errorf("%s restored with permission %04o, want %04o", p, fi.Mode().Perm(), s.mode.Perm())
		}
	}
}

// TestVerifyChecksPermissions: a file whose content matches but that its
// owner cannot read and write does not match the manifest.
func TestVerifyChecksPermissions(t *testing.T) {
	cp := newCP(t)
	root := t.TempDir()
	writeSpec(t, root, map[string]spec{"a.txt": file("a\n"), "b.txt": file("b\n")})
	m := snapshot(t, cp, root)
	if err := Verify(root, []string{"a.txt", "b.txt"}, m); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(root, "a.txt"), 0); err != nil {
		t.Fatal(err)
	}
	err := Verify(root, []string{"a.txt", "b.txt"}, m)
	if !errors.Is(err, ErrConflict) || !strings.Contains(err.Error(), "a.txt (permission 0000, want 0644)") || strings.Contains(err.Error(), "b.txt") {
		t.Fatalf("Verify = %v, want a permission mismatch naming a.txt only", err)
	}
}

// TestDamagedHunkIsCorruptNotConflict: when a file's content is exactly the
// one the diff's index line names, a hunk that does not apply is a damaged
// diff, and the error says so.
func TestDamagedHunkIsCorruptNotConflict(t *testing.T) {
	cp, root, before, diff := changedTree(t)
	damaged := []byte(strings.Replace(string(diff), "+seven", "+SEVEN", 1))
	if string(damaged) == string(diff) {
		t.Fatal("test diff has no +seven line")
	}
	err := cp.Revert(context.Background(), root, damaged, before)
	if !errors.Is(err, ErrCorruptDiff) {
		t.Fatalf("Revert with a damaged hunk = %v, want ErrCorruptDiff", err)
	}
}
