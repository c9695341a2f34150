package replica

import (
	"context"
	"fmt"
	"io/fs"
	"math/rand"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/decreehq/decree/controller/lease"
	"github.com/decreehq/decree/pkg/checkpoint"
	"github.com/decreehq/decree/pkg/wiremanifest"
	decreev1 "github.com/decreehq/decree/proto/decree/v1"
)

// oracleManifest is what a publication of tree must hold, built without
// the service: tree plus every context file under .decree/, read now.
func oracleManifest(t *testing.T, root string, tree *checkpoint.Manifest) *checkpoint.Manifest {
	t.Helper()
	out := &checkpoint.Manifest{Files: map[string]checkpoint.Entry{}}
	for p, e := range tree.Files {
		out.Files[p] = e
	}
	err := filepath.WalkDir(filepath.Join(root, ".decree"), func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		rel = filepath.ToSlash(rel)
		if !wiremanifest.IsContextPath(rel) {
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		fi, _ := d.Info()
		out.Files[rel] = checkpoint.Entry{SHA256: sumOf(data), Size: int64(len(data)), Mode: checkpoint.ModeOf(fi.Mode())}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// checkPublished publishes tree and checks the publication against the
// oracle: its digest, the manifest a worker receives, and that every
// content of it can be fetched. It returns the entries sent.
func (e *env) checkPublished(t *testing.T, step string, tree *checkpoint.Manifest) []*decreev1.FileEntry {
	t.Helper()
	want := oracleManifest(t, e.root, tree)
	wantDigest, _ := wiremanifest.Digest(want)
	digest, release, err := e.svc.Publish(tree)
	if err != nil {
		t.Fatalf("%s: %v", step, err)
	}
	t.Cleanup(release)
	if digest != wantDigest {
		t.Fatalf("%s: published digest %s, the manifest's is %s", step, digest, wantDigest)
	}
	e.leases["tok"] = lease.AssignmentView{MessageID: "m-1", Attempt: 1, ManifestDigest: digest}
	resp, err := e.svc.Manifest("tok")
	if err != nil {
		t.Fatalf("%s: %v", step, err)
	}
	got, err := wiremanifest.FromProtoWithContext(resp.GetFiles(), 0)
	if err != nil {
		t.Fatalf("%s: %v", step, err)
	}
	if !got.Equal(want) {
		t.Fatalf("%s: the manifest sent differs from the tree: %v", step, checkpoint.Compare(want, got))
	}
	if d := wiremanifest.DigestEntries(resp.GetFiles()); d != digest {
		t.Fatalf("%s: the entries sent hash to %s, not to the digest %s", step, d, digest)
	}
	var sums []string
	seen := map[string]bool{}
	for _, en := range want.Files {
		if en.Mode != checkpoint.ModeSymlink && !seen[en.SHA256] {
			seen[en.SHA256] = true
			sums = append(sums, en.SHA256)
		}
	}
	if _, _, err := e.fetch(t, sums...); err != nil {
		t.Fatalf("%s: fetching every content of the manifest: %v", step, err)
	}
	return resp.GetFiles()
}

// TestPublishFollowsTheTree changes a served tree and its context files
// step by step and checks every publication against a manifest built from
// scratch (digest, entries, contents served), also for manifests that do
// not come from the served snapshots (compared in full), and that an
// unchanged entry is not converted again.
func TestPublishFollowsTheTree(t *testing.T) {
	files := map[string]string{"dup1": "same\n", "dup2": "same\n"}
	for i := 0; i < 100; i++ {
		files[fmt.Sprintf("d%d/f%03d.txt", i%7, i)] = fmt.Sprintf("file %d\n", i)
	}
	e := newEnv(t, files, Options{})
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- e.cp.Serve(ctx, e.root) }()
	t.Cleanup(func() { cancel(); <-served })
	write := func(rel, data string) {
		p := filepath.Join(e.root, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	snap := func() *checkpoint.Manifest {
		m, err := e.cp.Snapshot(context.Background(), e.root)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	write(".decree/migrations/001-first.md", "first spec\n")
	write(".decree/config.yaml", "parallel: 1\n")
	prev := e.checkPublished(t, "start", snap())

	r := rand.New(rand.NewSource(3))
	for step := 0; step < 120; step++ { // enough to rebuild the blob index once
		name := fmt.Sprintf("step %d", step)
		changed := 0
		for k := 0; k < 1+r.Intn(4); k++ {
			rel := fmt.Sprintf("d%d/f%03d.txt", r.Intn(7), r.Intn(320))
			switch r.Intn(5) {
			case 0:
				os.Remove(filepath.Join(e.root, rel))
			case 1:
				os.Symlink("../dup1", filepath.Join(e.root, fmt.Sprintf("d0/l%d-%d", step, k)))
			case 2:
				os.Chmod(filepath.Join(e.root, rel), 0o755)
			default:
				write(rel, fmt.Sprintf("step %d change %d\n", step, k))
			}
			changed++
		}
		switch step % 5 {
		case 1: // a new spec
			write(fmt.Sprintf(".decree/migrations/%03d.md", step), "spec\n")
			changed++
		case 2: // a spec rewritten with the same size and mtime
			p := filepath.Join(e.root, ".decree/migrations/001-first.md")
			fi, _ := os.Stat(p)
			write(".decree/migrations/001-first.md", fmt.Sprintf("FIRST SPEC%d\n", step%10))
			if err := os.Chtimes(p, fi.ModTime(), fi.ModTime()); err != nil {
				t.Fatal(err)
			}
			changed++
		case 3: // one of two files with the same content changes
			write("dup1", fmt.Sprintf("dup1 now %d\n", step))
			changed++
		}
		tree := snap()
		if step%6 == 5 {
			// A manifest not from the served snapshots (a lane's tree
			// arrives over the wire): compared in full.
			copied, err := wiremanifest.FromProto(wiremanifest.ToProto(tree), 0)
			if err != nil {
				t.Fatal(err)
			}
			tree = copied
		}
		got := e.checkPublished(t, name, tree)
		// Entries that did not change are the same objects as before:
		// only the changed paths were converted.
		old := map[string]*decreev1.FileEntry{}
		for _, fe := range prev {
			old[fe.GetPath()] = fe
		}
		fresh := 0
		for _, fe := range got {
			if old[fe.GetPath()] != fe {
				fresh++
			}
		}
		if fresh > changed {
			t.Errorf("%s: %d entries converted again for %d changes", name, fresh, changed)
		}
		prev = got
	}
	// The same tree again: nothing converted.
	again := e.checkPublished(t, "unchanged", snap())
	for i, fe := range again {
		if prev[i] != fe {
			t.Fatalf("publishing an unchanged tree converted %s again", fe.GetPath())
		}
	}
}

// TestPublishRereadsChangedContextFiles: a context file rewritten with the
// same size and its mtime put back is read again (its ctime moved).
func TestPublishRereadsChangedContextFiles(t *testing.T) {
	e := newEnv(t, map[string]string{"a.txt": "a\n"}, Options{})
	spec := filepath.Join(e.root, ".decree", "migrations", "001.md")
	if err := os.MkdirAll(filepath.Dir(spec), 0o755); err != nil {
		t.Fatal(err)
	}
	stamp := time.Now().Add(-time.Hour)
	for i, content := range []string{"version one\n", "version two\n", "version 3!!\n"} {
		if err := os.WriteFile(spec, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(spec, stamp, stamp); err != nil {
			t.Fatal(err)
		}
		e.checkPublished(t, fmt.Sprintf("version %d", i+1), e.base)
	}
}
