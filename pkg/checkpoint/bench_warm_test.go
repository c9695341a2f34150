package checkpoint

import (
	"fmt"
	"github.com/decreehq/decree/internal/testtool"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// warmTree writes files small files (twenty to a directory, three levels
// deep, like bench/checkpoint's generator) under a fresh directory.
func warmTree(b *testing.B, files int) string {
	b.Helper()
	root := filepath.Join(fastTempDir(b), "tree")
	for i := 0; i < files; i++ {
		d := filepath.Join(root, fmt.Sprintf("d%02d", i/1000), fmt.Sprintf("e%02d", (i/20)%50))
		if i%20 == 0 {
			if err := os.MkdirAll(d, 0o755); err != nil {
				b.Fatal(err)
			}
		}
		data := fmt.Sprintf("package p%d\n\nfunc F%d() int { return %d }\n", i, i, i)
		if err := os.WriteFile(filepath.Join(d, fmt.Sprintf("f%05d.go", i)), []byte(data), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(root, ".gitignore"), []byte("*.tmp\nbuild/\n"), 0o644); err != nil {
		b.Fatal(err)
	}
	// Files must be older than the racy window to be cached.
	old := time.Now().Add(-time.Hour)
	filepath.Walk(root, func(p string, _ os.FileInfo, _ error) error { return os.Chtimes(p, old, old) })
	return root
}

// BenchmarkWarmSnapshot: a snapshot of an unchanged 20,000-file tree with a
// warm stat cache (a fresh Checkpointer each time, as in a new process),
// against `git status --porcelain` on the same tree (process start
// included). Compare ns/op of the two sub-benchmarks for the ratio.
// DECREE_WARM_FILES overrides the number of files.
func BenchmarkWarmSnapshot(b *testing.B) {
	files := 20000
	if s := os.Getenv("DECREE_WARM_FILES"); s != "" {
		files, _ = strconv.Atoi(s)
	}
	root := warmTree(b, files)
	state := fastTempDir(b)
	opts := Options{ObjectsDir: filepath.Join(state, "objects"), CachePath: filepath.Join(state, "statcache"), NoSync: true}
	cp, err := New(opts)
	if err != nil {
		b.Fatal(err)
	}
	snapshot(b, cp, root)
	b.Run("decree", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			cp, err := New(opts)
			if err != nil {
				b.Fatal(err)
			}
			m := snapshot(b, cp, root)
			if st := cp.LastStats(); st.Hashed != 0 || len(m.Files) != files+1 {
				b.Fatalf("not a warm snapshot: %+v, %d files", st, len(m.Files))
			}
		}
	})
	b.Run("git-status", func(b *testing.B) {
		testtool.Require(b, "git")
		env := gitEnv(b)
		for _, args := range [][]string{{"init", "-q"}, {"add", "-A"}} {
			if out, err := run(b, root, env, "git", args...); err != nil {
				b.Fatalf("git %v: %v\n%s", args, err, out)
			}
		}
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			cmd := exec.Command("git", "status", "--porcelain")
			cmd.Dir = root
			cmd.Env = env
			if out, err := cmd.Output(); err != nil || len(out) == 0 {
				b.Fatalf("git status: %v", err)
			}
		}
	})
}
