package replica

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/decreehq/decree/pkg/checkpoint"
	"github.com/decreehq/decree/pkg/wiremanifest"
	decreev1 "github.com/decreehq/decree/proto/decree/v1"
	"google.golang.org/protobuf/proto"
)

// walkTree is the oracle of a replica's content: every file and symlink
// below ws outside .decree/, read now (no stat cache).
func walkTree(t *testing.T, ws string) *checkpoint.Manifest {
	t.Helper()
	m := &checkpoint.Manifest{Files: map[string]checkpoint.Entry{}}
	err := filepath.WalkDir(ws, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(ws, p)
		rel = filepath.ToSlash(rel)
		switch {
		case rel == ".decree" || rel == ".git":
			return filepath.SkipDir
		case d.IsDir():
			return nil
		case d.Type()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			m.Files[rel] = checkpoint.Entry{SHA256: sumOf([]byte(target)), Size: int64(len(target)), Mode: checkpoint.ModeSymlink, Link: target}
		default:
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			fi, _ := d.Info()
			m.Files[rel] = checkpoint.Entry{SHA256: sumOf(data), Size: int64(len(data)), Mode: checkpoint.ModeOf(fi.Mode())}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func (f *fakeController) manifest(t *testing.T) *checkpoint.Manifest {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	m, err := wiremanifest.FromProto(f.entries, 0)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestSyncConverges: a replica that missed publications, whose sync was
// cut in the middle of the contents, that was restarted (a new Replica on
// the same workspace, its stat cache read back) and whose files were
// damaged meanwhile still ends with exactly the controller's tree, checked
// by a walk that trusts no cache.
func TestSyncConverges(t *testing.T) {
	f, c := serve(t)
	r, ws := newReplica(t)
	version := func(v int) {
		files := map[string]string{}
		for i := 0; i < 60; i++ {
			files[fmt.Sprintf("d%d/f%02d.txt", i%5, i)] = fmt.Sprintf("file %d of version %d\n", i, (v+i)%4)
		}
		files["big.bin"] = strings.Repeat(fmt.Sprintf("big %d\n", v), 3000) // several chunks
		if v%2 == 1 {
			files[fmt.Sprintf("only-in-%d.txt", v)] = "odd\n"
		}
		f.set(t, files, map[string]string{"latest": fmt.Sprintf("d%d", v%5)})
	}
	check := func(step string) {
		t.Helper()
		if got, want := walkTree(t, ws), f.manifest(t); !got.Equal(want) {
			t.Fatalf("%s: the replica differs from the controller's tree: %v", step, checkpoint.Compare(want, got))
		}
	}
	version(1)
	if _, err := r.Sync(context.Background(), c, "tok", ""); err != nil {
		t.Fatal(err)
	}
	check("first sync")

	// Versions 2 and 3 are published while the replica is away.
	version(2)
	version(3)
	if _, err := r.Sync(context.Background(), c, "tok", ""); err != nil {
		t.Fatal(err)
	}
	check("after two missed publications")

	// A sync cut after a few chunks of contents.
	version(4)
	ctx, cancel := context.WithCancel(context.Background())
	sent := 0
	f.mu.Lock()
	f.onChunk = func() {
		if sent++; sent == 3 {
			cancel()
		}
	}
	f.mu.Unlock()
	if _, err := r.Sync(ctx, c, "tok", ""); err == nil {
		t.Fatal("the cut sync succeeded")
	}
	f.mu.Lock()
	f.onChunk = nil
	f.mu.Unlock()

	// The worker restarts; meanwhile a file was truncated and one deleted.
	os.Truncate(filepath.Join(ws, "d1", "f01.txt"), 2)
	os.Remove(filepath.Join(ws, "d2", "f02.txt"))
	r2, err := Open(ws, Options{})
	if err != nil {
		t.Fatal(err)
	}
	version(5)
	if _, err := r2.Sync(context.Background(), c, "tok", ""); err != nil {
		t.Fatal(err)
	}
	check("after a cut sync, a restart and damage")
	if entries, _ := os.ReadDir(filepath.Join(ws, filepath.FromSlash(Dir), "tmp")); len(entries) != 0 {
		t.Errorf("temporary files left behind: %v", entries)
	}
}

// TestSyncDetectsAlteredManifest: entries that do not hash to the digest
// sent with them are refused, whatever was changed.
func TestSyncDetectsAlteredManifest(t *testing.T) {
	alter := map[string]func(fe *decreev1.FileEntry){
		"content": func(fe *decreev1.FileEntry) { fe.Sha256 = sumOf([]byte("other")) },
		"size":    func(fe *decreev1.FileEntry) { fe.Size++ },
		"mode":    func(fe *decreev1.FileEntry) { fe.Mode = wiremanifest.WireExec },
		"path":    func(fe *decreev1.FileEntry) { fe.Path = "renamed.txt" },
	}
	for name, change := range alter {
		t.Run(name, func(t *testing.T) {
			f, c := serve(t)
			r, ws := newReplica(t)
			f.set(t, map[string]string{"a.txt": "a\n", "b.txt": "b\n"}, nil)
			f.tamper = func(entries []*decreev1.FileEntry) []*decreev1.FileEntry {
				fe := proto.Clone(entries[0]).(*decreev1.FileEntry)
				change(fe)
				entries[0] = fe
				return entries
			}
			if _, err := r.Sync(context.Background(), c, "tok", ""); !errors.Is(err, ErrDigestMismatch) {
				t.Fatalf("err = %v, want ErrDigestMismatch", err)
			}
			if m := walkTree(t, ws); len(m.Files) != 0 {
				t.Errorf("the replica was changed: %v", m.Paths())
			}
		})
	}
}
