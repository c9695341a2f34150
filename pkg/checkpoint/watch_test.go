//go:build linux

package checkpoint

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/decreehq/decree/internal/testtool"
)

// serve runs cp.Serve on root until the test ends and waits until the
// root is served.
func serve(t testing.TB, cp *Checkpointer, root string) context.CancelFunc {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- cp.Serve(ctx, root) }()
	stop := func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}
	var once sync.Once
	t.Cleanup(func() { once.Do(stop) })
	deadline := time.Now().Add(10 * time.Second)
	for {
		cp.mu.Lock()
		ok := cp.watching(root) != nil
		cp.mu.Unlock()
		if ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("Serve did not register the root")
		}
		time.Sleep(time.Millisecond)
	}
	return func() { once.Do(stop) }
}

// checkWatched takes a snapshot through the watcher and compares it with
// a walk of the tree by a Checkpointer without cache or watcher (the
// oracle); walked says whether the watched one should have walked.
func checkWatched(t *testing.T, cp *Checkpointer, root string, walked bool) *Manifest {
	t.Helper()
	got := snapshot(t, cp, root)
	if st := cp.LastStats(); st.Walked != walked {
		t.Fatalf("snapshot walked the tree: %v, want %v (stats %+v)", st.Walked, walked, st)
	}
	oracle, err := New(Options{ObjectsDir: filepath.Join(t.TempDir(), "objects"), NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	want := snapshot(t, oracle, root)
	if !got.Equal(want) || fmt.Sprint(got.Perms) != fmt.Sprint(want.Perms) {
		t.Fatalf("watched snapshot differs from a walk\n got: %v %v\nwant: %v %v", got.Files, got.Perms, want.Files, want.Perms)
	}
	// The watched manifest's paths are kept in order without a sort.
	gotJSON, err := MarshalManifest(got)
	if err != nil {
		t.Fatal(err)
	}
	wantJSON, _ := MarshalManifest(want)
	if !bytes.Equal(gotJSON, wantJSON) || (!walked && !got.orderValid()) {
		t.Fatalf("manifest.json of the watched snapshot differs (order kept: %v)\n got: %s\nwant: %s", got.orderValid(), gotJSON, wantJSON)
	}
	return got
}

// TestWatchedSnapshots changes a tree step by step (real files, real
// inotify) and checks after each step that the watched snapshot, which
// looks only at what the kernel reported, equals a walk of the tree, and
// that the diff between consecutive snapshots turns a copy of the tree
// before the step into the tree after it under git apply.
func TestWatchedSnapshots(t *testing.T) {
	git := testtool.Require(t, "git")
	outside := t.TempDir() // holds a hard link to a file of the tree
	steps := []struct {
		name string
		do   func(t *testing.T, root string)
	}{
		{"edit same size", func(t *testing.T, root string) { write(t, root, "a.txt", "A\n") }},
		{"append", func(t *testing.T, root string) { appendTo(t, root, "src/x/y.go", "more\n") }},
		{"chmod +x", func(t *testing.T, root string) { chmod(t, root, "a.txt", 0o755) }},
		{"chmod 600", func(t *testing.T, root string) { chmod(t, root, "src/x/y.go", 0o600) }},
		{"delete file", func(t *testing.T, root string) { rm(t, root, "b.txt") }},
		{"new dir with files before any watch", func(t *testing.T, root string) {
			write(t, root, "new/deep/er/f1", "1\n")
			write(t, root, "new/deep/f2", "2\n")
			write(t, root, "new/f3", "3\n")
		}},
		{"file in the new dir", func(t *testing.T, root string) { write(t, root, "new/deep/er/f4", "4\n") }},
		{"rename a directory", func(t *testing.T, root string) { mv(t, root, "new", "renamed") }},
		{"edit in the renamed directory", func(t *testing.T, root string) { write(t, root, "renamed/deep/f2", "two\n") }},
		{"rename it back over a new one", func(t *testing.T, root string) {
			write(t, root, "new/other", "o\n")
			rm(t, root, "new")
			mv(t, root, "renamed", "new")
		}},
		{"move a directory out of the tree", func(t *testing.T, root string) {
			if err := os.Rename(filepath.Join(root, "new"), filepath.Join(t.TempDir(), "gone")); err != nil {
				t.Fatal(err)
			}
		}},
		{"names with newlines and quotes", func(t *testing.T, root string) {
			write(t, root, "odd\nname.txt", "nl\n")
			write(t, root, "dir\nwith newline/\"q\" \t tab", "q\n")
		}},
		{"edit them", func(t *testing.T, root string) {
			write(t, root, "odd\nname.txt", "NL\n")
			appendTo(t, root, "dir\nwith newline/\"q\" \t tab", "more\n")
		}},
		{"hard link to a file outside the tree", func(t *testing.T, root string) {
			write(t, root, "hl.txt", "linked\n")
			old := time.Now().Add(-time.Hour) // not racily clean: only the link count says "look"
			if err := os.Chtimes(filepath.Join(root, "hl.txt"), old, old); err != nil {
				t.Fatal(err)
			}
			if err := os.Link(filepath.Join(root, "hl.txt"), filepath.Join(outside, "hl")); err != nil {
				t.Fatal(err)
			}
		}},
		{"write through the outside name (no event in the tree)", func(t *testing.T, root string) {
			if err := os.WriteFile(filepath.Join(outside, "hl"), []byte("changed outside\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}},
		{"symlink", func(t *testing.T, root string) { mklink(t, root, "a.txt", "link") }},
		{"retarget symlink", func(t *testing.T, root string) { rm(t, root, "link"); mklink(t, root, "src", "link") }},
		{"file replaced by a directory", func(t *testing.T, root string) {
			rm(t, root, "a.txt")
			write(t, root, "a.txt/inside", "i\n")
		}},
		{"directory replaced by a file", func(t *testing.T, root string) {
			rm(t, root, "a.txt")
			write(t, root, "a.txt", "file again\n")
		}},
		{".gitignore hides a file and a directory", func(t *testing.T, root string) {
			write(t, root, "build/out.o", "obj\n")
			write(t, root, "keep.log", "log\n")
			write(t, root, ".gitignore", "*.log\nbuild/\n")
		}},
		{"file created in an ignored directory", func(t *testing.T, root string) { write(t, root, "build/more.o", "x\n") }},
		{"nested .decreeignore re-includes", func(t *testing.T, root string) {
			write(t, root, "src/debug.log", "d\n")
			write(t, root, "src/.decreeignore", "!debug.log\n")
		}},
		{".gitignore removed", func(t *testing.T, root string) { rm(t, root, ".gitignore") }},
		{"edit in the no longer ignored directory", func(t *testing.T, root string) { write(t, root, "build/out.o", "obj2\n") }},
		{"ignore the directory again, then change inside it", func(t *testing.T, root string) {
			write(t, root, ".gitignore", "build/\n")
		}},
		{"change inside the ignored directory", func(t *testing.T, root string) { write(t, root, "build/out.o", "obj3\n") }},
		{"delete a directory tree", func(t *testing.T, root string) { rm(t, root, "src") }},
		{"nothing", func(t *testing.T, root string) {}},
	}
	root := t.TempDir()
	write(t, root, "a.txt", "a\n")
	write(t, root, "b.txt", "b\n")
	write(t, root, "src/x/y.go", "package x\n")
	cp := newCP(t)
	serve(t, cp, root)
	prev := checkWatched(t, cp, root, true) // the first snapshot walks
	prevTree := t.TempDir()
	copyTracked(t, root, prevTree, prev)
	for _, s := range steps {
		ok := t.Run(s.name, func(t *testing.T) {
			s.do(t, root)
			var diff bytes.Buffer
			if _, err := cp.DiffTo(context.Background(), root, prev, &diff); err != nil {
				t.Fatal(err)
			}
			if cp.LastStats().Walked {
				t.Fatal("the diff walked the tree")
			}
			cur := checkWatched(t, cp, root, false)
			// Compare looks only at what changed since prev: it must
			// agree with a comparison of every path.
			fast := Compare(prev, cur)
			slow := Compare(&Manifest{Files: prev.Files}, &Manifest{Files: cur.Files})
			if changesText(fast) != changesText(slow) {
				t.Fatalf("Compare through the delta: %v, want %v", fast, slow)
			}
			if len(slow) > 0 && (cur.delta == nil || cur.base.Value() != prev) {
				t.Fatalf("the manifest after a change does not say what it changed since the one before: delta %v base %p prev %p", cur.delta, cur.base.Value(), prev)
			}
			if diff.Len() > 0 {
				p := filepath.Join(t.TempDir(), "d.patch")
				if err := os.WriteFile(p, diff.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
				runOracle(t, "git apply", prevTree, []string{git, "apply", "--binary", p}, trackedState(t, root, cur), diff.Bytes(), func(t testing.TB, dir string) string { return trackedState(t, dir, cur) })
			}
			prev = cur
			os.RemoveAll(prevTree)
			copyTracked(t, root, prevTree, cur)
		})
		if !ok {
			break
		}
	}
	// A FIFO (which neither copyTree nor git would read) is not tracked.
	if err := mkfifo(filepath.Join(root, "fifo")); err != nil {
		t.Fatal(err)
	}
	checkWatched(t, cp, root, false)
}

// copyTracked copies the paths of m from src into dst.
func copyTracked(t testing.TB, src, dst string, m *Manifest) {
	t.Helper()
	for p, e := range m.Files {
		from, to := filepath.Join(src, filepath.FromSlash(p)), filepath.Join(dst, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
			t.Fatal(err)
		}
		if e.Mode == ModeSymlink {
			if err := os.Symlink(e.Link, to); err != nil {
				t.Fatal(err)
			}
			continue
		}
		b, err := os.ReadFile(from)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(to, b, m.PermOf(p)); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(to, m.PermOf(p)); err != nil {
			t.Fatal(err)
		}
	}
}

// trackedState is treeState restricted to the paths of m.
func trackedState(t testing.TB, root string, m *Manifest) string {
	var keep []string
	for _, line := range strings.Split(treeState(t, root), "\n") {
		for p := range m.Files {
			if strings.HasPrefix(line, p+" ") {
				keep = append(keep, line)
				break
			}
		}
	}
	return strings.Join(keep, "\n")
}

// TestWatchedSnapshotOverflow: when the kernel drops events (a real
// overflow of the inotify queue, then an injected one), the next snapshot
// walks the whole tree and sees every change.
func TestWatchedSnapshotOverflow(t *testing.T) {
	root := t.TempDir()
	write(t, root, "a.txt", "a\n")
	cp := newCP(t)
	serve(t, cp, root)
	checkWatched(t, cp, root, true)
	write(t, root, "a.txt", "A\n")
	checkWatched(t, cp, root, false)

	// Each new file queues at least two events (create, close): more
	// files than the queue holds overflow it.
	limit := 16384
	if b, err := os.ReadFile("/proc/sys/fs/inotify/max_queued_events"); err == nil {
		if n, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
			limit = n
		}
	}
	if limit > 1<<17 {
		t.Skipf("fs.inotify.max_queued_events is %d: too many files to overflow it", limit)
	}
	write(t, root, "many/f0", "x")
	checkWatched(t, cp, root, false) // many/ is watched now
	for i := 1; i < limit/2+100; i++ {
		write(t, root, fmt.Sprintf("many/f%d", i), "x")
	}
	write(t, root, "a.txt", "after overflow\n")
	checkWatched(t, cp, root, true)
	write(t, root, "many/f1", "y")
	checkWatched(t, cp, root, false)

	cp.mu.Lock()
	cp.watching(root).w.SimulateOverflow()
	cp.mu.Unlock()
	write(t, root, "many/f2", "z")
	checkWatched(t, cp, root, true)
}

// TestWatchedSnapshotUnwatchedChange: a change made while no watcher ran
// (between two Serve calls) is seen by the next snapshot, even one that
// keeps the file's size and mtime.
func TestWatchedSnapshotUnwatchedChange(t *testing.T) {
	root := t.TempDir()
	write(t, root, "a.txt", "a\n")
	old := time.Now().Add(-time.Hour)
	if err := os.Chtimes(filepath.Join(root, "a.txt"), old, old); err != nil {
		t.Fatal(err)
	}
	cp := newCP(t)
	stop := serve(t, cp, root)
	checkWatched(t, cp, root, true)
	checkWatched(t, cp, root, false)
	stop()
	write(t, root, "a.txt", "b\n")
	if err := os.Chtimes(filepath.Join(root, "a.txt"), old, old); err != nil {
		t.Fatal(err)
	}
	m := snapshot(t, cp, root) // not served: a walk
	if !cp.LastStats().Walked || m.Files["a.txt"].SHA256 != sha("b\n") {
		t.Fatalf("walk without watcher: %+v %v", cp.LastStats(), m.Files["a.txt"])
	}
	write(t, root, "a.txt", "c\n")
	if err := os.Chtimes(filepath.Join(root, "a.txt"), old, old); err != nil {
		t.Fatal(err)
	}
	serve(t, cp, root)
	m = checkWatched(t, cp, root, true)
	if m.Files["a.txt"].SHA256 != sha("c\n") {
		t.Fatal("the change made while nothing watched was missed")
	}
}

// TestWatchLimitFallsBack: when the watcher cannot watch every directory
// (the inotify watch limit, here a lower cap), every snapshot walks, and
// sees every change.
func TestWatchLimitFallsBack(t *testing.T) {
	root := t.TempDir()
	for i := 0; i < 5; i++ {
		write(t, root, fmt.Sprintf("d%d/f", i), "x")
	}
	dir := t.TempDir()
	cp, err := New(Options{ObjectsDir: filepath.Join(dir, "objects"), CachePath: filepath.Join(dir, "statcache"), NoSync: true, MaxWatches: 3})
	if err != nil {
		t.Fatal(err)
	}
	serve(t, cp, root)
	for i := 0; i < 3; i++ {
		write(t, root, "d4/f", strconv.Itoa(i))
		checkWatched(t, cp, root, true)
	}
}

// TestWatchedNewDirRace creates directories and files in them while
// snapshots run: whatever the interleaving of the watch being added and
// the files being created, the snapshot once things settle equals a walk.
func TestWatchedNewDirRace(t *testing.T) {
	root := t.TempDir()
	write(t, root, "a", "a")
	cp := newCP(t)
	serve(t, cp, root)
	checkWatched(t, cp, root, true)
	for round := 0; round < 20; round++ {
		done := make(chan struct{})
		go func() {
			defer close(done)
			for i := 0; i < 30; i++ {
				d := filepath.Join(root, fmt.Sprintf("r%d/s%d/t", round, i%3))
				if err := os.MkdirAll(d, 0o755); err != nil {
					t.Error(err)
					return
				}
				if err := os.WriteFile(filepath.Join(d, fmt.Sprintf("f%d", i)), []byte("x"), 0o644); err != nil {
					t.Error(err)
					return
				}
			}
		}()
		for {
			if _, err := cp.Snapshot(context.Background(), root); err != nil {
				t.Fatal(err)
			}
			select {
			case <-done:
			default:
				continue
			}
			break
		}
		checkWatched(t, cp, root, false)
	}
}

func sha(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

func mkfifo(p string) error { return syscall.Mkfifo(p, 0o644) }

func write(t testing.TB, root, rel, data string) {
	t.Helper()
	p := filepath.Join(root, filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

func appendTo(t testing.TB, root, rel, data string) {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(root, filepath.FromSlash(rel)), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(data); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

func chmod(t testing.TB, root, rel string, mode os.FileMode) {
	t.Helper()
	if err := os.Chmod(filepath.Join(root, filepath.FromSlash(rel)), mode); err != nil {
		t.Fatal(err)
	}
}

func rm(t testing.TB, root, rel string) {
	t.Helper()
	if err := os.RemoveAll(filepath.Join(root, filepath.FromSlash(rel))); err != nil {
		t.Fatal(err)
	}
}

func mv(t testing.TB, root, from, to string) {
	t.Helper()
	if err := os.Rename(filepath.Join(root, filepath.FromSlash(from)), filepath.Join(root, filepath.FromSlash(to))); err != nil {
		t.Fatal(err)
	}
}

func mklink(t testing.TB, root, target, rel string) {
	t.Helper()
	if err := os.Symlink(target, filepath.Join(root, filepath.FromSlash(rel))); err != nil {
		t.Fatal(err)
	}
}

// TestWatcherOwnerKilled: a process serving the tree (a child running
// this test binary) snapshots through its watcher, sees a change, is
// killed with SIGKILL; a change made then, while nothing watches, is seen
// by the first snapshot of a new serving process sharing the same store
// and stat cache (whose entry for the file is now stale).
func TestWatcherOwnerKilled(t *testing.T) {
	if os.Getenv("DECREE_WATCH_CHILD") != "" {
		return
	}
	root, state := t.TempDir(), t.TempDir()
	write(t, root, "src/a.txt", "one\n")
	old := time.Now().Add(-time.Hour)
	start := func() (*exec.Cmd, io.WriteCloser, *bufio.Scanner) {
		cmd := exec.Command(os.Args[0], "-test.run=^TestWatchChild$", "-test.v")
		cmd.Env = append(os.Environ(), "DECREE_WATCH_CHILD="+root+string(filepath.ListSeparator)+state)
		in, err := cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		return cmd, in, bufio.NewScanner(out)
	}
	// snap asks the child for a snapshot and returns "sha256 walked".
	snap := func(in io.Writer, sc *bufio.Scanner) string {
		t.Helper()
		if _, err := io.WriteString(in, "snap\n"); err != nil {
			t.Fatal(err)
		}
		for sc.Scan() {
			if line, ok := strings.CutPrefix(sc.Text(), "SNAP "); ok {
				return line
			}
		}
		t.Fatalf("the child ended: %v", sc.Err())
		return ""
	}
	edit := func(s string) {
		write(t, root, "src/a.txt", s)
		if err := os.Chtimes(filepath.Join(root, "src/a.txt"), old, old); err != nil {
			t.Fatal(err)
		}
	}
	edit("one\n")
	first, in, sc := start()
	if got, want := snap(in, sc), sha("one\n")+" walked"; got != want {
		t.Fatalf("first snapshot: %s, want %s", got, want)
	}
	edit("two\n")
	if got, want := snap(in, sc), sha("two\n")+" watched"; got != want {
		t.Fatalf("watched snapshot: %s, want %s", got, want)
	}
	if err := first.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	first.Wait()
	edit("six\n") // same size, same mtime: only ctime and content differ
	_, in, sc = start()
	if got, want := snap(in, sc), sha("six\n")+" walked"; got != want {
		t.Fatalf("first snapshot of the new process: %s, want %s", got, want)
	}
}

// TestWatchChild is the serving process of TestWatcherOwnerKilled.
func TestWatchChild(t *testing.T) {
	env := os.Getenv("DECREE_WATCH_CHILD")
	if env == "" {
		t.Skip("run by TestWatcherOwnerKilled")
	}
	root, state, _ := strings.Cut(env, string(filepath.ListSeparator))
	cp, err := New(Options{ObjectsDir: filepath.Join(state, "objects"), CachePath: filepath.Join(state, "statcache")})
	if err != nil {
		t.Fatal(err)
	}
	serve(t, cp, root)
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		m := snapshot(t, cp, root)
		how := "watched"
		if cp.LastStats().Walked {
			how = "walked"
		}
		fmt.Printf("SNAP %s %s\n", m.Files["src/a.txt"].SHA256, how)
	}
}

// TestManifestOrderChecked: a kept path order is used only while it
// matches the manifest, so a manifest changed by its holder still
// marshals sorted.
func TestManifestOrderChecked(t *testing.T) {
	e := Entry{SHA256: strings.Repeat("a", 64), Mode: ModeFile}
	m := &Manifest{Files: map[string]Entry{"a": e, "b": e, "c": e}, order: []string{"a", "b", "c"}}
	if !m.orderValid() {
		t.Fatal("a matching order is not used")
	}
	delete(m.Files, "b")
	m.Files["d"] = e
	if m.orderValid() {
		t.Fatal("an order missing a path is used")
	}
	if got := strings.Join(m.Paths(), ","); got != "a,c,d" {
		t.Fatalf("Paths %s", got)
	}
	m.order = []string{"c", "a", "d"}
	if m.orderValid() {
		t.Fatal("an unsorted order is used")
	}
	for _, order := range [][]string{{"c", "a", "d"}, {"a", "b", "c"}, {"a", "c", "d"}} {
		m.order = order
		got, err := MarshalManifest(m)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := MarshalManifest(&Manifest{Files: m.Files})
		if !bytes.Equal(got, want) {
			t.Fatalf("order %v: manifest.json\n%s\nwant\n%s", order, got, want)
		}
	}
}

func changesText(chs []Change) string {
	var b strings.Builder
	for _, ch := range chs {
		fmt.Fprintf(&b, "%q", ch.Path)
		for _, e := range []*Entry{ch.Before, ch.After} {
			if e != nil {
				fmt.Fprintf(&b, " %+v", *e)
			} else {
				b.WriteString(" -")
			}
		}
		b.WriteByte('\n')
	}
	return b.String()
}
