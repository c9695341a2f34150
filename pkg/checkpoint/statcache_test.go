package checkpoint

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// age moves every file's mtime an hour back, out of the racy window.
func age(t *testing.T, root string) {
	t.Helper()
	old := time.Now().Add(-time.Hour)
	filepath.Walk(root, func(p string, fi os.FileInfo, err error) error {
		if err == nil && fi.Mode().IsRegular() {
			os.Chtimes(p, old, old)
		}
		return nil
	})
}

func TestStatCacheSkipsUnchangedFiles(t *testing.T) {
	cp := newCP(t)
	root := t.TempDir()
	files := map[string]spec{}
	for i := 0; i < 50; i++ {
		files[filepath.Join("d", string(rune('a'+i%26))+strings.Repeat("x", i))] = file(strings.Repeat("line\n", i))
	}
	writeSpec(t, root, files)
	age(t, root)
	first := snapshot(t, cp, root)
	if st := cp.LastStats(); st.Hashed != 50 || st.CacheHits != 0 || st.Stored == 0 {
		t.Fatalf("cold snapshot stats %+v, want 50 hashed", st)
	}
	second := snapshot(t, cp, root)
	if st := cp.LastStats(); st.Hashed != 0 || st.CacheHits != 50 || st.HashedBytes != 0 {
		t.Fatalf("warm snapshot stats %+v, want 50 cache hits and nothing read", st)
	}
	if !second.Equal(first) {
		t.Fatal("warm snapshot differs from cold")
	}

	// Same size, mtime put back: ctime still tells.
	p := filepath.Join(root, "d", "bx")
	fi, _ := os.Stat(p)
	if err := os.WriteFile(p, bytes.Repeat([]byte("x"), int(fi.Size())), 0o644); err != nil {
		t.Fatal(err)
	}
	os.Chtimes(p, fi.ModTime(), fi.ModTime())
	third := snapshot(t, cp, root)
	if st := cp.LastStats(); st.Hashed != 1 {
		t.Fatalf("stats %+v, want exactly the rewritten file hashed", st)
	}
	if third.Files["d/bx"] == first.Files["d/bx"] {
		t.Fatal("rewritten file kept its old hash")
	}
}

func TestStatCacheRacyFilesAreRehashed(t *testing.T) {
	cp := newCP(t)
	root := t.TempDir()
	writeSpec(t, root, map[string]spec{"old": file("o\n"), "fresh": file("f\n")})
	age(t, root)
	os.WriteFile(filepath.Join(root, "fresh"), []byte("g\n"), 0o644) // mtime now
	snapshot(t, cp, root)
	snapshot(t, cp, root)
	if st := cp.LastStats(); st.Hashed != 1 || st.CacheHits != 1 {
		t.Fatalf("stats %+v: a file modified within the racy window must be rehashed", st)
	}
}

func TestStatCacheCorruptOrForeign(t *testing.T) {
	dir := t.TempDir()
	var logs bytes.Buffer
	cache := filepath.Join(dir, "cache")
	cp, err := New(Options{ObjectsDir: filepath.Join(dir, "obj"), CachePath: cache, NoSync: true, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	writeSpec(t, root, map[string]spec{"a": file("a\n"), "b": file("b\n")})
	age(t, root)
	want := snapshot(t, cp, root)
	data, _ := os.ReadFile(cache)
	os.WriteFile(cache, data[:len(data)-5], 0o644)
	got := snapshot(t, cp, root)
	if !got.Equal(want) || cp.LastStats().Hashed != 2 {
		t.Fatalf("truncated cache: stats %+v", cp.LastStats())
	}
	if !strings.Contains(logs.String(), "stat cache") {
		t.Fatalf("no warning logged for a corrupt cache: %q", logs.String())
	}
	// A cache written for another root is not used there.
	other := t.TempDir()
	copyTree(t, root, other)
	age(t, other)
	snapshot(t, cp, other)
	if st := cp.LastStats(); st.CacheHits != 0 {
		t.Fatalf("cache of %s used for %s: %+v", root, other, st)
	}
}

func TestSnapshotIgnoresAndNeedsNoGit(t *testing.T) {
	cp := newCP(t)
	root := t.TempDir()
	writeSpec(t, root, map[string]spec{
		".gitignore":     file("*.log\nbuild/\n"),
		".decreeignore":  file("secret.txt\n!keep.log\n"),
		"a.log":          file("x"),
		"keep.log":       file("k"),
		"build/out":      file("o"),
		"secret.txt":     file("s"),
		"src/x.go":       file("x"),
		".git/config":    file("c"),
		".decree/runs/x": file("r"),
		"link-out":       link("/etc"),
		"src/.gitignore": file("!*.log\n"),
		"src/debug.log":  file("d"),
	})
	m := snapshot(t, cp, root)
	got := strings.Join(m.Paths(), ",")
	want := ".decreeignore,.gitignore,keep.log,link-out,src/.gitignore,src/debug.log,src/x.go"
	if got != want {
		t.Fatalf("manifest paths %s, want %s", got, want)
	}
	if e := m.Files["link-out"]; e.Mode != ModeSymlink || e.Link != "/etc" {
		t.Fatalf("symlink out of the tree recorded as %+v, want a link to /etc", e)
	}
}

func TestStorePrune(t *testing.T) {
	cp := newCP(t)
	root := t.TempDir()
	writeSpec(t, root, map[string]spec{"a": file("aaa\n"), "b": file("bbb\n")})
	m1 := snapshot(t, cp, root)
	writeSpec(t, root, map[string]spec{"a": file("changed\n")})
	m2 := snapshot(t, cp, root)
	n, err := cp.Store().Prune(m2)
	if err != nil || n != 1 {
		t.Fatalf("Prune removed %d (%v), want 1", n, err)
	}
	for _, e := range m2.Files {
		if _, err := cp.Store().Get(e.SHA256); err != nil {
			t.Fatalf("live blob lost: %v", err)
		}
	}
	if _, err := cp.Store().Get(m1.Files["a"].SHA256); err == nil {
		t.Fatal("dead blob still readable after Prune")
	}
	// A fresh Store on the same directory reads the rewritten packs.
	s, _ := OpenStore(cp.Store().Dir())
	if _, err := s.Get(m2.Files["b"].SHA256); err != nil {
		t.Fatal(err)
	}
	if _, _, err := cp.Diff(context.Background(), root, m1); err == nil {
		t.Fatal("Diff against a pruned manifest must fail")
	} else if !strings.Contains(err.Error(), "missing from the object store") {
		t.Fatalf("unclear error: %v", err)
	}
}
