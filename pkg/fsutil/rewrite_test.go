package fsutil

import (
	"os"
	"path/filepath"
	"sort"
	"syscall"
	"testing"
)

// RewriteFile replaces the content as seen through the path, keeps one
// spare beside it, and after the first two writes allocates no inode: the
// file and its spare trade places.
func TestRewriteFileReusesInodes(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "state.json")
	inode := func(path string) uint64 {
		t.Helper()
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		return fi.Sys().(*syscall.Stat_t).Ino
	}
	seen := map[uint64]bool{}
	for i, content := range []string{"one\n", "two two\n", "3\n", "four four four\n", "five\n"} {
		if err := RewriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(p)
		if err != nil || string(got) != content {
			t.Fatalf("write %d: read %q, %v; want %q", i+1, got, err, content)
		}
		if fi, _ := os.Stat(p); fi.Mode().Perm() != 0o644 {
			t.Errorf("write %d: mode %v, want 0644", i+1, fi.Mode().Perm())
		}
		seen[inode(p)] = true
	}
	if len(seen) != 2 {
		t.Errorf("%d inodes named the file over five writes, want 2 (the file and its spare)", len(seen))
	}
	ents, _ := os.ReadDir(dir)
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	sort.Strings(names)
	if want := []string{".state.json" + SpareSuffix, "state.json"}; len(names) != 2 || names[0] != want[0] || names[1] != want[1] {
		t.Errorf("directory holds %q, want %q", names, want)
	}
}

// A swap interrupted after the link (a crash between the steps) leaves a
// prev link behind; the next write still succeeds and the content is right.
func TestRewriteFileAfterInterruptedSwap(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "state.json")
	if err := RewriteFile(p, []byte("a\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(p, filepath.Join(dir, ".state.json"+PrevSuffix)); err != nil {
		t.Fatal(err)
	}
	if err := RewriteFile(p, []byte("b\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(p); string(got) != "b\n" {
		t.Errorf("read %q, want b", got)
	}
	if _, err := os.Lstat(filepath.Join(dir, ".state.json"+PrevSuffix)); !os.IsNotExist(err) {
		t.Errorf("prev link left behind: %v", err)
	}
}

// ReplaceFileUnsynced replaces a file's content through a new inode, and
// SyncFiles accepts files, directories and paths that no longer exist.
func TestReplaceFileUnsyncedAndSyncFiles(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "run.json")
	for _, content := range []string{"first\n", "second\n"} {
		if err := ReplaceFileUnsynced(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		if got, err := os.ReadFile(p); err != nil || string(got) != content {
			t.Fatalf("read %q, %v; want %q", got, err, content)
		}
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("%d entries left in the directory, want only run.json", len(ents))
	}
	if err := SyncFiles(p, dir, filepath.Join(dir, "gone")); err != nil {
		t.Errorf("SyncFiles: %v", err)
	}
	if err := SyncFiles(filepath.Join(dir, "run.json", "under-a-file")); err == nil {
		t.Error("SyncFiles of a path under a regular file succeeded")
	}
}
