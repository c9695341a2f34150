package checkpoint

import (
	"bytes"
	"compress/zlib"
	"context"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bluekeyes/go-gitdiff/gitdiff"

	"github.com/decreehq/decree/internal/testtool"
)

// bigFileSize is the large file of the delta tests: over StreamThreshold
// several times (64 MB; 12 MB under the race detector), random
// (incompressible) so that only a delta keeps the diff small.
func bigFileSize() int64 {
	if raceEnabled {
		return 12 << 20
	}
	return 64 << 20
}

// TestLargeFileDeltaDiff: a small change to a large file is written as git
// binary patch deltas (forward and reverse) under 1 MB, which git apply
// reads forward and in reverse, and which RevertFile undoes exactly
// (putting the file back from the store, never holding it in memory).
func TestLargeFileDeltaDiff(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 64 MB files")
	}
	testtool.Require(t, "git")
	r := rand.New(rand.NewSource(22))
	bigSize := bigFileSize()
	base := make([]byte, bigSize)
	r.Read(base)
	cases := []struct {
		name   string
		change func(t *testing.T, abs string)
	}{
		{"16-bytes-in-place", func(t *testing.T, abs string) {
			f, err := os.OpenFile(abs, os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if _, err := f.WriteAt([]byte("sixteen bytes!!!"), bigSize/2+3); err != nil {
				t.Fatal(err)
			}
		}},
		{"append-and-edit-and-chmod", func(t *testing.T, abs string) {
			f, err := os.OpenFile(abs, os.O_WRONLY|os.O_APPEND, 0)
			if err != nil {
				t.Fatal(err)
			}
			f.Write(bytes.Repeat([]byte("tail "), 1000))
			f.Close()
			g, _ := os.OpenFile(abs, os.O_WRONLY, 0)
			g.WriteAt([]byte{0, 1, 2}, 5)
			g.Close()
			os.Chmod(abs, 0o700)
		}},
		{"truncate", func(t *testing.T, abs string) {
			if err := os.Truncate(abs, bigSize-12345); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			cp := newCP(t)
			root := t.TempDir()
			if err := os.WriteFile(filepath.Join(root, "data.bin"), base, 0o644); err != nil {
				t.Fatal(err)
			}
			writeSpec(t, root, map[string]spec{"notes.txt": file("a\n")})
			before := snapshot(t, cp, root)
			want0 := treeState(t, root)
			tc.change(t, filepath.Join(root, "data.bin"))
			writeSpec(t, root, map[string]spec{"notes.txt": file("b\n")})
			want1 := treeState(t, root)
			var diff bytes.Buffer
			after, err := cp.DiffTo(ctx, root, before, &diff)
			if err != nil {
				t.Fatal(err)
			}
			if diff.Len() >= 1<<20 {
				t.Fatalf("diff is %d bytes, want < 1 MB", diff.Len())
			}
			if strings.Count(diff.String(), "\ndelta ") != 2 || strings.Contains(diff.String(), "\nliteral ") {
				t.Fatalf("want two delta hunks and no literal:\n%.2000s", diff.String())
			}
			patch := filepath.Join(t.TempDir(), "changes.diff")
			if err := os.WriteFile(patch, diff.Bytes(), 0o644); err != nil {
				t.Fatal(err)
			}
			// git apply forward on a copy of the old tree, and in reverse
			// on a copy of the new one.
			for _, dir := range []struct {
				args       []string
				from, want string
			}{{[]string{"apply"}, want0, want1}, {[]string{"apply", "-R"}, want1, want0}} {
				work := t.TempDir()
				copyTree(t, root, work)
				if dir.from == want0 {
					os.WriteFile(filepath.Join(work, "data.bin"), base, 0o644)
					os.Chmod(filepath.Join(work, "data.bin"), 0o644)
					writeSpec(t, work, map[string]spec{"notes.txt": file("a\n")})
				}
				if out, err := run(t, work, gitEnv(t), "git", append(dir.args, patch)...); err != nil {
					t.Fatalf("git %v: %v\n%s", dir.args, err, out)
				}
				if got := gitState(t, work); got != permField.ReplaceAllString(dir.want, "$1 ") {
					t.Fatalf("git %v: tree differs", dir.args)
				}
			}
			// decree's own Apply (go-gitdiff reads the delta) forward on
			// a copy of the old tree.
			fwd := t.TempDir()
			copyTree(t, root, fwd)
			os.WriteFile(filepath.Join(fwd, "data.bin"), base, 0o644)
			os.Chmod(filepath.Join(fwd, "data.bin"), 0o644)
			writeSpec(t, fwd, map[string]spec{"notes.txt": file("a\n")})
			if err := cp.Apply(ctx, fwd, diff.Bytes(), false, after); err != nil {
				t.Fatalf("Apply forward: %v", err)
			}
			if got := treeState(t, fwd); got != want1 {
				t.Fatal("Apply forward: tree differs")
			}
			if changed, err := ChangedFile(root, patch); err != nil || len(changed) != 0 {
				t.Fatalf("ChangedFile: %v %v", changed, err)
			}
			if err := cp.RevertFile(ctx, root, patch, before); err != nil {
				t.Fatal(err)
			}
			if got := treeState(t, root); got != want0 {
				t.Fatal("tree after RevertFile differs from the original")
			}
		})
	}
}

// TestLargeFileShiftFallsBackToLiteral: an insertion that moves the rest
// of a large file shares no blocks at the same offsets, so the change is
// written as literals, which git apply still reads.
func TestLargeFileShiftFallsBackToLiteral(t *testing.T) {
	testtool.Require(t, "git")
	ctx := context.Background()
	cp := newCP(t)
	root := t.TempDir()
	r := rand.New(rand.NewSource(5))
	data := make([]byte, StreamThreshold+(1<<20))
	r.Read(data)
	os.WriteFile(filepath.Join(root, "f.bin"), data, 0o644)
	before := snapshot(t, cp, root)
	shifted := append([]byte("inserted"), data...)
	os.WriteFile(filepath.Join(root, "f.bin"), shifted, 0o644)
	var diff bytes.Buffer
	if _, err := cp.DiffTo(ctx, root, before, &diff); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(diff.String(), "\nliteral ") || strings.Contains(diff.String(), "\ndelta ") {
		t.Fatal("want literals for a shifted file")
	}
	patch := filepath.Join(t.TempDir(), "changes.diff")
	os.WriteFile(patch, diff.Bytes(), 0o644)
	if out, err := run(t, root, gitEnv(t), "git", "apply", "-R", patch); err != nil {
		t.Fatalf("git apply -R: %v\n%s", err, out)
	}
	if got, _ := os.ReadFile(filepath.Join(root, "f.bin")); !bytes.Equal(got, data) {
		t.Fatal("git apply -R did not restore the file")
	}
}

// TestDeltaBuilderEncoding: copies longer than one instruction holds,
// offsets with zero bytes and inserts longer than 127 bytes come out as
// go-gitdiff's applier (and git's) read them.
func TestDeltaBuilderEncoding(t *testing.T) {
	src := make([]byte, maxCopy+300)
	rand.New(rand.NewSource(1)).Read(src)
	dst := append(append(append([]byte{}, src[:maxCopy+10]...), bytes.Repeat([]byte("x"), 300)...), src[0x10000:0x10000+0x10000]...)
	var d deltaBuilder
	d.header(int64(len(src)), int64(len(dst)))
	d.copyFrom(0, maxCopy+10)
	if err := d.insert(bytes.Repeat([]byte("x"), 300)); err != nil {
		t.Fatal(err)
	}
	d.copyFrom(0x10000, 0x10000)
	got, err := applyDelta(src, d.finish())
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, dst) {
		t.Fatal("delta does not reproduce the target")
	}
}

// applyDelta applies a git delta with go-gitdiff, as Apply does.
func applyDelta(src, delta []byte) ([]byte, error) {
	var out, z bytes.Buffer
	zw := zlib.NewWriter(&z)
	zw.Write(delta)
	zw.Close()
	a := gitdiff.NewBinaryApplier(&out, bytes.NewReader(src))
	if err := a.ApplyFragment(&gitdiff.BinaryFragment{Method: gitdiff.BinaryPatchDelta, Size: int64(len(delta)), RawData: z.Bytes()}); err != nil {
		return nil, err
	}
	if err := a.Close(); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}
