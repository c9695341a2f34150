package checkpoint

import (
	"bytes"
	"fmt"
	"github.com/decreehq/decree/internal/testtool"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// largeEdit returns a 50,000-line file and a copy with 500 scattered edits
// (changed, inserted and deleted lines).
func largeEdit() (old, new []byte) {
	r := rand.New(rand.NewSource(1))
	var a, b bytes.Buffer
	for i := 0; i < 50000; i++ {
		line := fmt.Sprintf("line %d: %x\n", i, r.Int63())
		a.WriteString(line)
		switch {
		case i%100 == 50 && i%300 == 50:
			b.WriteString("inserted line\n")
			b.WriteString(line)
		case i%100 == 50 && i%300 == 150:
			// deleted
		case i%100 == 50:
			b.WriteString("changed " + line)
		default:
			b.WriteString(line)
		}
	}
	return a.Bytes(), b.Bytes()
}

// BenchmarkDiffLargeFile: decree's diff of a 50,000-line file with 500
// scattered edits, and `git diff --no-index` on the same two files as the
// reference (process start included, as decree's cost is in-process).
// Compare ns/op of the two sub-benchmarks for the ratio.
func BenchmarkDiffLargeFile(b *testing.B) {
	old, new := largeEdit()
	b.Run("decree", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(old)))
		var w bytes.Buffer
		for i := 0; i < b.N; i++ {
			w.Reset()
			WriteFileDiff(&w, "big.txt", &Side{Mode: ModeFile, Data: old}, &Side{Mode: ModeFile, Data: new})
		}
		if w.Len() == 0 {
			b.Fatal("empty diff")
		}
	})
	b.Run("git-diff-no-index", func(b *testing.B) {
		testtool.Require(b, "git")
		dir := b.TempDir()
		os.WriteFile(filepath.Join(dir, "a"), old, 0o644)
		os.WriteFile(filepath.Join(dir, "b"), new, 0o644)
		b.SetBytes(int64(len(old)))
		for i := 0; i < b.N; i++ {
			cmd := exec.Command("git", "diff", "--no-index", "--no-color", "a", "b")
			cmd.Dir = dir
			cmd.Env = gitEnv(b)
			out, err := cmd.Output()
			if len(out) == 0 {
				b.Fatalf("git diff: %v", err)
			}
		}
	})
}

// TestLargeDiffRoundTrip checks the benchmark's diff is right.
func TestLargeDiffRoundTrip(t *testing.T) {
	old, new := largeEdit()
	var w bytes.Buffer
	WriteFileDiff(&w, "big.txt", &Side{Mode: ModeFile, Data: old}, &Side{Mode: ModeFile, Data: new})
	root := t.TempDir()
	os.WriteFile(filepath.Join(root, "big.txt"), old, 0o644)
	if err := Apply(t.Context(), root, w.Bytes(), false, nil); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(filepath.Join(root, "big.txt"))
	if !bytes.Equal(got, new) {
		t.Fatal("applying the large diff does not give the new file")
	}
	if hunks := bytes.Count(w.Bytes(), []byte("\n@@ ")); hunks < 400 {
		t.Fatalf("only %d hunks for 500 scattered edits", hunks)
	}
}
