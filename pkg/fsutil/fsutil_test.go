package fsutil

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestCheckRelPath(t *testing.T) {
	tests := []struct {
		path string
		ok   bool
	}{
		{"a.txt", true},
		{"dir/sub/file.md", true},
		{"name with spaces/é.txt", true},
		{"", false},
		{"/etc/passwd", false},
		{"../x", false},
		{"a/../../x", false},
		{"a/./b", false},
		{"a//b", false},
		{"a/", false},
		{`a\b`, false},
		{"a\x00b", false},
		{"a\nb", false},
	}
	for _, tc := range tests {
		err := CheckRelPath(tc.path)
		if (err == nil) != tc.ok {
			t.Errorf("CheckRelPath(%q) = %v, want ok=%v", tc.path, err, tc.ok)
		}
		if err != nil && !errors.Is(err, ErrUnsafePath) {
			t.Errorf("CheckRelPath(%q) error does not wrap ErrUnsafePath: %v", tc.path, err)
		}
	}
}

func TestCheckName(t *testing.T) {
	for _, bad := range []string{"", "a/b", `a\b`, "..", "x..y", "a\x00", "a\tb"} {
		if err := CheckName("message", bad); err == nil || !errors.Is(err, ErrUnsafePath) || !strings.Contains(err.Error(), "message") {
			t.Errorf("CheckName(%q) = %v, want an ErrUnsafePath naming the kind", bad, err)
		}
	}
	for _, good := range []string{"fix-types", "2025022514320000-1", "develop.sh", "Übung"} {
		if err := CheckName("message", good); err != nil {
			t.Errorf("CheckName(%q) = %v", good, err)
		}
	}
}

func TestConfinedJoinRefusesSymlinkEscapes(t *testing.T) {
	root := t.TempDir()
	outside := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "real", "deep"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(root, "out")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("real", filepath.Join(root, "in")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/", filepath.Join(root, "slash")); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		rel string
		ok  bool
	}{
		{"real/deep/file", true},
		{"real/new/dir/file", true}, // missing directories are fine
		{"in/deep/file", true},      // a link that stays inside
		{"out", true},               // the last element is never followed
		{"out/file", false},
		{"out/new/file", false},
		{"slash/etc/passwd", false},
		{"../escape", false},
		{"/abs", false},
	}
	for _, tc := range tests {
		got, err := ConfinedJoin(root, tc.rel)
		if (err == nil) != tc.ok {
			t.Errorf("ConfinedJoin(%q) = %q, %v; want ok=%v", tc.rel, got, err, tc.ok)
			continue
		}
		if err == nil && got != filepath.Join(root, tc.rel) {
			t.Errorf("ConfinedJoin(%q) = %q", tc.rel, got)
		}
	}
}

func TestWriteFileAtomic(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "f.txt")
	for i, content := range []string{"first\n", "second, longer content\n", ""} {
		if err := WriteFileAtomic(p, []byte(content), 0o640); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(p)
		if err != nil || string(got) != content {
			t.Fatalf("write %d: read %q, %v", i, got, err)
		}
		fi, _ := os.Stat(p)
		if fi.Mode().Perm() != 0o640 {
			t.Fatalf("mode = %v", fi.Mode())
		}
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 {
		t.Fatalf("temporary files left behind: %v", ents)
	}
	if err := WriteFileAtomic(filepath.Join(dir, "missing", "f"), []byte("x"), 0o644); err == nil || !strings.Contains(err.Error(), "missing") {
		t.Fatalf("write into a missing directory: %v", err)
	}
}

func TestMoveFile(t *testing.T) {
	dir := t.TempDir()
	src, dst := filepath.Join(dir, "a"), filepath.Join(dir, "sub", "b")
	os.WriteFile(src, []byte("x"), 0o644)
	os.Mkdir(filepath.Join(dir, "sub"), 0o755)
	if err := MoveFile(src, dst); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(src); !os.IsNotExist(err) {
		t.Fatalf("source still exists: %v", err)
	}
	if b, _ := os.ReadFile(dst); string(b) != "x" {
		t.Fatalf("destination = %q", b)
	}
	if err := MoveFile(src, dst); err == nil {
		t.Fatal("moving a missing file succeeded")
	}
}

func TestWithin(t *testing.T) {
	for _, tc := range []struct {
		root, path string
		want       bool
	}{
		{"/a/b", "/a/b", true}, {"/a/b", "/a/b/c", true}, {"/a/b", "/a/bc", false}, {"/a/b", "/a", false}, {"/", "/x", true},
	} {
		if got := Within(tc.root, tc.path); got != tc.want {
			t.Errorf("Within(%q, %q) = %v", tc.root, tc.path, got)
		}
	}
}

func TestRemoveEmptyParents(t *testing.T) {
	root := t.TempDir()
	os.MkdirAll(filepath.Join(root, "a", "b", "c"), 0o755)
	os.WriteFile(filepath.Join(root, "a", "keep"), []byte("x"), 0o644)
	RemoveEmptyParents(root, filepath.Join(root, "a", "b", "c"))
	if _, err := os.Stat(filepath.Join(root, "a", "b")); !os.IsNotExist(err) {
		t.Fatalf("empty a/b was not removed: %v", err)
	}
	if _, err := os.Stat(filepath.Join(root, "a", "keep")); err != nil {
		t.Fatalf("a/ with a file must stay: %v", err)
	}
	RemoveEmptyParents(root, root)
	if _, err := os.Stat(root); err != nil {
		t.Fatalf("root itself was removed: %v", err)
	}
}

func TestReplaceSymlink(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "link")
	for _, setup := range []func(){
		func() {}, // nothing there
		func() { os.WriteFile(p, []byte("x"), 0o644) }, // a file
		func() { os.Symlink("old", p) },                // another link
	} {
		os.Remove(p)
		setup()
		if err := ReplaceSymlink(p, "target/a"); err != nil {
			t.Fatal(err)
		}
		if got, err := os.Readlink(p); err != nil || got != "target/a" {
			t.Errorf("Readlink = %q, %v", got, err)
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("temporary link left behind: %v", entries)
	}
	if err := ReplaceSymlink(filepath.Join(dir, "missing", "link"), "t"); err == nil || !strings.Contains(err.Error(), "create symlink") {
		t.Errorf("missing directory: %v", err)
	}
}

func TestReadRegular(t *testing.T) {
	dir := t.TempDir()
	reg := filepath.Join(dir, "a.md")
	if err := os.WriteFile(reg, []byte("hi"), 0o644); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "p.md")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "l.md")
	if err := os.Symlink(reg, link); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		path, want string
	}{
		{reg, ""}, {fifo, "FIFO"}, {link, "symlink"}, {dir, "directory"},
	} {
		done := make(chan struct{})
		var b []byte
		var err error
		go func() { b, err = ReadRegular(tc.path); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Fatalf("ReadRegular(%s) blocked", tc.path)
		}
		switch {
		case tc.want == "" && (err != nil || string(b) != "hi"):
			t.Errorf("ReadRegular(%s) = %q, %v", tc.path, b, err)
		case tc.want != "" && (!errors.Is(err, ErrNotRegular) || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("ReadRegular(%s) error %v, want ErrNotRegular naming %s", tc.path, err, tc.want)
		}
	}
}

func TestSafeName(t *testing.T) {
	for in, want := range map[string]string{
		"bad\nname.md": "bad_name.md", "a/b": "a_b", "..x": "__x", "": "unnamed", "ok-name.md": "ok-name.md", "t\tab\x00": "t_ab_",
	} {
		got := SafeName(in)
		if got != want {
			t.Errorf("SafeName(%q) = %q, want %q", in, got, want)
		}
		if err := CheckName("file", got); err != nil {
			t.Errorf("SafeName(%q) = %q fails CheckName: %v", in, got, err)
		}
	}
}

func TestOpenFileNoFollow(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "f")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(file, filepath.Join(dir, "l")); err != nil {
		t.Fatal(err)
	}
	f, err := OpenFileNoFollow(file)
	if err != nil {
		t.Fatalf("regular file: %v", err)
	}
	f.Close()
	if f, err := OpenFileNoFollow(filepath.Join(dir, "l")); err == nil {
		f.Close()
		t.Error("a symlink was followed")
	}
	if f, err := OpenFileNoFollow(dir); !errors.Is(err, ErrUnsafePath) {
		if f != nil {
			f.Close()
		}
		t.Errorf("a directory: %v, want ErrUnsafePath", err)
	}
}

// A reader of a file that ReplaceFileUnsynced rewrites over and over sees
// one complete version each time, never a mix or a partial one, with no
// retry (what state.json and leases.json readers rely on).
func TestReplaceFileUnsyncedNoTornReads(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.json")
	versions := [][]byte{bytes.Repeat([]byte("a"), 3000), bytes.Repeat([]byte("b"), 100), bytes.Repeat([]byte("c"), 9000)}
	if err := ReplaceFileUnsynced(path, versions[0], 0o644); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range 2000 {
			if err := ReplaceFileUnsynced(path, versions[i%len(versions)], 0o644); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	reads := 0
	for {
		select {
		case <-done:
			if reads == 0 {
				t.Fatal("no read raced the writes")
			}
			return
		default:
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.ContainsFunc(versions, func(v []byte) bool { return bytes.Equal(v, b) }) {
			t.Fatalf("read %d bytes that are no complete version", len(b))
		}
		reads++
	}
}

// SyncFiles syncs a batch larger than its concurrency bound, skips a path
// that no longer exists, and reports a path it cannot open.
func TestSyncFilesBatch(t *testing.T) {
	dir := t.TempDir()
	sub := filepath.Join(dir, "sub")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	var paths []string
	for i := 0; i < 3*syncParallel; i++ {
		p := filepath.Join(dir, fmt.Sprintf("f%d", i))
		if i%2 == 1 {
			p = filepath.Join(sub, fmt.Sprintf("f%d", i))
		}
		if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	paths = append(paths, filepath.Join(dir, "gone"), sub)
	if err := SyncFiles(paths...); err != nil {
		t.Fatalf("SyncFiles: %v", err)
	}
	locked := filepath.Join(dir, "locked")
	if err := os.Mkdir(locked, 0o755); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(locked, "ENOTDIR-parent", "x")
	if err := os.WriteFile(filepath.Join(locked, "ENOTDIR-parent"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := SyncFiles(append(paths, bad)...); err == nil {
		t.Fatal("SyncFiles of a path under a regular file succeeded")
	}
}
