package checkpoint

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/decreehq/decree/pkg/fsutil"
)

// TestRestoreLargeFiles: a large deleted file comes back from the store
// with its content and permission bits, a large new one goes.
func TestRestoreLargeFiles(t *testing.T) {
	cp := newCP(t)
	root := t.TempDir()
	bigA := strings.Repeat("large line of text\n", (StreamThreshold/19)+10)
	writeSpec(t, root, map[string]spec{"keep.bin": file(bigA), "run.sh": exe(bigA + "x")})
	before := snapshot(t, cp, root)
	state := treeState(t, root)
	os.Remove(filepath.Join(root, "keep.bin"))
	os.Remove(filepath.Join(root, "run.sh"))
	writeSpec(t, root, map[string]spec{"new.bin": file(bigA + "new")})
	paths, err := cp.Restore(context.Background(), root, before)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(paths, ",") != "keep.bin,new.bin,run.sh" {
		t.Errorf("paths %v", paths)
	}
	if got := treeState(t, root); got != state {
		t.Errorf("restored tree differs")
	}
}

// TestRestoreNeverWritesThroughSymlinks: a directory replaced by a symlink
// to somewhere outside is replaced back, and nothing is written outside.
func TestRestoreNeverWritesThroughSymlinks(t *testing.T) {
	cp := newCP(t)
	root := t.TempDir()
	outside := t.TempDir()
	writeSpec(t, root, map[string]spec{"d/x": file("x\n")})
	before := snapshot(t, cp, root)
	os.RemoveAll(filepath.Join(root, "d"))
	if err := os.Symlink(outside, filepath.Join(root, "d")); err != nil {
		t.Fatal(err)
	}
	// The symlink d is tracked now (a new entry), so Restore deletes it
	// first and recreates the directory.
	if _, err := cp.Restore(context.Background(), root, before); err != nil {
		t.Fatal(err)
	}
	if ents, _ := os.ReadDir(outside); len(ents) != 0 {
		t.Fatalf("written outside: %v", ents)
	}
	if fi, err := os.Lstat(filepath.Join(root, "d")); err != nil || !fi.IsDir() {
		t.Fatalf("d is not a directory again: %v %v", fi, err)
	}
	// An ignored symlink in the way is refused.
	os.RemoveAll(filepath.Join(root, "d"))
	os.WriteFile(filepath.Join(root, ".gitignore"), []byte("d\n"), 0o644)
	before2 := snapshot(t, cp, root) // d/x gone, .gitignore tracked
	before2.Files["d/x"] = before.Files["d/x"]
	if err := os.Symlink(outside, filepath.Join(root, "d")); err != nil {
		t.Fatal(err)
	}
	_, err := cp.Restore(context.Background(), root, before2)
	if !errors.Is(err, fsutil.ErrUnsafePath) {
		t.Fatalf("restore through an ignored symlink: %v, want ErrUnsafePath", err)
	}
	if ents, _ := os.ReadDir(outside); len(ents) != 0 {
		t.Fatalf("written outside: %v", ents)
	}
}

func TestRestoreRefusesMissingContent(t *testing.T) {
	cp := newCP(t)
	root := t.TempDir()
	writeSpec(t, root, map[string]spec{"a.txt": file("a\n")})
	before := snapshot(t, cp, root)
	e := before.Files["a.txt"]
	e.SHA256 = strings.Repeat("ab", 32)
	before.Files["b.txt"] = e
	_, err := cp.Restore(context.Background(), root, before)
	if !errors.Is(err, ErrMissingBlob) || !strings.Contains(err.Error(), "b.txt") {
		t.Fatalf("err = %v, want ErrMissingBlob naming b.txt", err)
	}
	if _, err := os.Stat(filepath.Join(root, "b.txt")); !os.IsNotExist(err) {
		t.Error("b.txt was written")
	}
}

// TestRestoreKeepsUntrackedPermissionBits: a file changed in place keeps
// permission bits git does not track (0600), as Apply does; a restored
// deleted file gets 0644.
func TestRestoreKeepsUntrackedPermissionBits(t *testing.T) {
	cp := newCP(t)
	root := t.TempDir()
	writeSpec(t, root, map[string]spec{"secret.txt": file("s\n"), "gone.txt": file("g\n")})
	os.Chmod(filepath.Join(root, "secret.txt"), 0o600)
	before := snapshot(t, cp, root)
	os.WriteFile(filepath.Join(root, "secret.txt"), []byte("changed\n"), 0o600)
	os.Remove(filepath.Join(root, "gone.txt"))
	if _, err := cp.Restore(context.Background(), root, before); err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]os.FileMode{"secret.txt": 0o600, "gone.txt": 0o644} {
		if fi, err := os.Stat(filepath.Join(root, p)); err != nil || fi.Mode().Perm() != want {
			t.Errorf("%s: %v %v, want %04o", p, fi.Mode(), err, want)
		}
	}
}
