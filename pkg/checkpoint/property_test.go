package checkpoint

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"math/rand"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/decreehq/decree/pkg/fsutil"
)

// chooser supplies the random decisions of a case: math/rand for the
// property test, the fuzzer's bytes for the fuzz target.
type chooser interface{ intn(n int) int }

type randChooser struct{ r *rand.Rand }

func (c randChooser) intn(n int) int { return c.r.Intn(n) }

type byteChooser struct{ b []byte }

func (c *byteChooser) intn(n int) int {
	if len(c.b) == 0 || n <= 1 {
		return 0
	}
	v := int(c.b[0])
	c.b = c.b[1:]
	return v % n
}

var (
	propNames = []string{"a", "b", "c.txt", "d e", "ü", "x.bin"}
	propWords = []string{"alpha", "beta", "", "gamma delta", "\t", "x"}
)

func randPath(c chooser) string {
	depth := 1 + c.intn(3)
	parts := make([]string, depth)
	for i := range parts {
		parts[i] = propNames[c.intn(len(propNames))]
	}
	return strings.Join(parts, "/")
}

func randContent(c chooser) string {
	switch c.intn(6) {
	case 0:
		return ""
	case 1: // binary
		b := make([]byte, 1+c.intn(40))
		for i := range b {
			b[i] = byte(c.intn(256))
		}
		b[c.intn(len(b))] = 0
		return string(b)
	}
	var sb strings.Builder
	eol := "\n"
	if c.intn(4) == 0 {
		eol = "\r\n"
	}
	n := c.intn(12)
	for i := 0; i < n; i++ {
		sb.WriteString(propWords[c.intn(len(propWords))])
		if i < n-1 || c.intn(3) > 0 {
			sb.WriteString(eol)
		}
	}
	return sb.String()
}

// listEntries returns the files and symlinks below root, and the dirs.
func listEntries(t testing.TB, root string) (files, dirs []string) {
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == root {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			dirs = append(dirs, rel)
		} else {
			files = append(files, rel)
		}
		return nil
	})
	sort.Strings(files)
	sort.Strings(dirs)
	return files, dirs
}

// place writes s at p, first removing whatever is in the way (a file where
// a directory is needed, or a directory where the file goes).
func place(t testing.TB, root, p string, s spec) {
	parts := strings.Split(p, "/")
	for i := 1; i < len(parts); i++ {
		anc := filepath.Join(root, filepath.FromSlash(strings.Join(parts[:i], "/")))
		if fi, err := os.Lstat(anc); err == nil && !fi.IsDir() {
			os.Remove(anc)
		}
	}
	putSpec(t, root, p, s)
}

func randSpec(c chooser) spec {
	switch c.intn(8) {
	case 0:
		return link(propNames[c.intn(len(propNames))] + "/../t")
	case 1:
		return exe(randContent(c))
	}
	return file(randContent(c))
}

// mutate applies one random change of any kind to the tree.
func mutate(t testing.TB, c chooser, root string) {
	files, dirs := listEntries(t, root)
	pick := func(list []string) string { return list[c.intn(len(list))] }
	switch op := c.intn(9); {
	case op == 0 || len(files) == 0: // new file or overwrite anything
		place(t, root, randPath(c), randSpec(c))
	case op == 1: // delete
		p := filepath.Join(root, filepath.FromSlash(pick(files)))
		os.Remove(p)
		fsutil.RemoveEmptyParents(root, filepath.Dir(p))
	case op == 2: // edit lines of a file
		p := pick(files)
		abs := filepath.Join(root, filepath.FromSlash(p))
		fi, _ := os.Lstat(abs)
		if fi.Mode()&fs.ModeSymlink != 0 {
			place(t, root, p, link("retargeted"+fmt.Sprint(c.intn(9))))
			return
		}
		b, _ := os.ReadFile(abs)
		lines := strings.SplitAfter(string(b), "\n")
		for n := 1 + c.intn(3); n > 0; n-- {
			i := c.intn(len(lines) + 1)
			switch c.intn(3) {
			case 0:
				lines = append(lines[:i], append([]string{propWords[c.intn(len(propWords))] + "\n"}, lines[i:]...)...)
			case 1:
				if i < len(lines) {
					lines = append(lines[:i], lines[i+1:]...)
				}
			case 2:
				if i < len(lines) {
					lines[i] = strings.TrimSuffix(lines[i], "\n")
				}
			}
		}
		os.WriteFile(abs, []byte(strings.Join(lines, "")), 0o644)
	case op == 3: // chmod
		abs := filepath.Join(root, filepath.FromSlash(pick(files)))
		if fi, _ := os.Lstat(abs); fi.Mode().IsRegular() {
			os.Chmod(abs, fi.Mode().Perm()^0o111)
		}
	case op == 4: // file replaced by a directory
		p := pick(files)
		place(t, root, p+"/"+propNames[c.intn(len(propNames))], randSpec(c))
	case op == 5 && len(dirs) > 0: // directory replaced by a file
		d := pick(dirs)
		os.RemoveAll(filepath.Join(root, filepath.FromSlash(d)))
		place(t, root, d, randSpec(c))
	case op == 6: // type change file <-> symlink
		p := pick(files)
		abs := filepath.Join(root, filepath.FromSlash(p))
		if fi, _ := os.Lstat(abs); fi.Mode()&fs.ModeSymlink != 0 {
			place(t, root, p, file(randContent(c)))
		} else {
			place(t, root, p, link("l"+fmt.Sprint(c.intn(9))))
		}
	case op == 7: // empty a file
		abs := filepath.Join(root, filepath.FromSlash(pick(files)))
		if fi, _ := os.Lstat(abs); fi.Mode().IsRegular() {
			os.WriteFile(abs, nil, 0o644)
		}
	default: // whole new content
		p := pick(files)
		place(t, root, p, randSpec(c))
	}
}

// deletionKind classifies a file a mutation deleted: its mode and whether
// its content is binary (holds a NUL byte), e.g. "644 binary".
func deletionKind(m Mode, data []byte) string {
	kind := "text"
	if bytes.IndexByte(data, 0) >= 0 {
		kind = "binary"
	}
	return m.String() + " " + kind
}

// roundTrip builds a random tree, mutates it, and checks that the diff
// reverts to an identical manifest and tree (content and exact permission
// bits), and applies forward again. It returns the kinds of the regular
// files the mutations deleted.
func roundTrip(t testing.TB, cp *Checkpointer, c chooser) (deleted []string) {
	ctx := context.Background()
	base := fastTempDir(t)
	root := filepath.Join(base, "root")
	os.Mkdir(root, 0o755)
	for n := 1 + c.intn(6); n > 0; n-- {
		place(t, root, randPath(c), randSpec(c))
	}
	before := snapshot(t, cp, root)
	state0 := treeState(t, root)
	pre := filepath.Join(base, "pre")
	copyTree(t, root, pre)
	for n := 1 + c.intn(4); n > 0; n-- {
		mutate(t, c, root)
	}
	state1 := treeState(t, root)
	post := filepath.Join(base, "post")
	copyTree(t, root, post)
	diff, after, err := cp.Diff(ctx, root, before)
	if err != nil {
		t.Fatalf("Diff: %v", err)
	}
	if (len(diff) == 0) != before.Equal(after) {
		t.Fatalf("diff emptiness (%d bytes) disagrees with manifest equality", len(diff))
	}
	for _, ch := range Compare(before, after) {
		if ch.After == nil && ch.Before.Mode != ModeSymlink {
			data, err := os.ReadFile(filepath.Join(pre, filepath.FromSlash(ch.Path)))
			if err != nil {
				t.Fatal(err)
			}
			deleted = append(deleted, deletionKind(ch.Before.Mode, data))
		}
	}
	if err := cp.Revert(ctx, root, diff, before); err != nil {
		t.Fatalf("Revert: %v\nbefore: %q\nafter: %q\ndiff:\n%s", err, state0, state1, diff)
	}
	if got := snapshot(t, cp, root); !got.Equal(before) {
		t.Fatalf("reverted manifest differs\nwant %q\ngot  %q\ndiff:\n%s", state0, treeState(t, root), diff)
	}
	if got := treeState(t, root); got != state0 {
		t.Fatalf("reverted tree differs\nwant %q\ngot  %q\ndiff:\n%s", state0, got, diff)
	}
	// Restore (no diff, contents streamed from the store) gets there too.
	if _, err := cp.Restore(ctx, post, before); err != nil {
		t.Fatalf("Restore: %v\nbefore: %q\nafter: %q", err, state0, state1)
	}
	if got := treeState(t, post); got != state0 {
		t.Fatalf("restored tree differs\nwant %q\ngot  %q", state0, got)
	}
	if err := cp.Apply(ctx, pre, diff, false, after); err != nil {
		t.Fatalf("Apply forward: %v\ndiff:\n%s", err, diff)
	}
	if got := treeState(t, pre); got != state1 {
		t.Fatalf("forward tree differs\nwant %q\ngot  %q\ndiff:\n%s", state1, got, diff)
	}
	return deleted
}

// TestPropertyRevert runs 1000 random trees with random mutations of every
// kind (edits, new, deleted, binary, empty, no final newline, CRLF, mode,
// symlinks, file<->directory, file<->symlink, odd names). Deletions of 644
// and 755 files, text and binary, must each occur many times, since a
// restored file must come back with its permission bits too.
func TestPropertyRevert(t *testing.T) {
	cp := newCP(t)
	r := rand.New(rand.NewSource(1))
	deleted := map[string]int{}
	for i := 0; i < 1000; i++ {
		seed := r.Int63()
		ok := t.Run(fmt.Sprint(seed), func(t *testing.T) {
			for _, k := range roundTrip(t, cp, randChooser{rand.New(rand.NewSource(seed))}) {
				deleted[k]++
			}
		})
		if !ok {
			t.Fatalf("case with seed %d failed", seed)
		}
	}
	t.Logf("deletions by kind: %v", deleted)
	for _, k := range []string{"644 text", "644 binary", "755 text", "755 binary"} {
		if deleted[k] < 10 {
			t.Errorf("only %d deletions of a %s file among the cases (%v); make mutations delete more", deleted[k], k, deleted)
		}
	}
}

func FuzzRevert(f *testing.F) {
	f.Add([]byte{3, 1, 4, 1, 5, 9, 2, 6})
	f.Add([]byte{0, 0, 0, 0, 4, 4, 4, 4, 5, 5, 6, 6, 1, 2})
	f.Add([]byte("binary\x00and text\nwith lines\r\n"))
	cp := newCP(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		roundTrip(t, cp, &byteChooser{b: data})
	})
}
