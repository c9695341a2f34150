package checkpoint

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

func newCP(t testing.TB) *Checkpointer {
	t.Helper()
	dir := fastTempDir(t)
	cp, err := New(Options{ObjectsDir: filepath.Join(dir, "objects"), CachePath: filepath.Join(dir, "statcache"), NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	return cp
}

// spec describes a tree entry: content and mode; a symlink has mode
// ModeSymlink and its target as content.
type spec struct {
	data string
	mode Mode
}

func file(s string) spec { return spec{s, ModeFile} }
func exe(s string) spec  { return spec{s, ModeExec} }
func link(s string) spec { return spec{s, ModeSymlink} }

func writeSpec(t testing.TB, root string, files map[string]spec) {
	t.Helper()
	for p, s := range files {
		putSpec(t, root, p, s)
	}
}

func putSpec(t testing.TB, root, p string, s spec) {
	t.Helper()
	abs := filepath.Join(root, filepath.FromSlash(p))
	if err := os.MkdirAll(filepath.Dir(abs), 0o755); err != nil {
		t.Fatal(err)
	}
	os.RemoveAll(abs)
	if s.mode == ModeSymlink {
		if err := os.Symlink(s.data, abs); err != nil {
			t.Fatal(err)
		}
		return
	}
	if err := os.WriteFile(abs, []byte(s.data), s.mode.Perm()); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(abs, s.mode.Perm()); err != nil {
		t.Fatal(err)
	}
}

// treeState lists every file and symlink below root (except .git) as
// "path mode permission content", the ground truth that trees are compared
// by (the permission bits exactly, so a file restored as 000 differs).
func treeState(t testing.TB, root string) string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Name() == ".git" && d.IsDir() {
			return filepath.SkipDir
		}
		if d.IsDir() {
			return nil
		}
		rel, _ := filepath.Rel(root, p)
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		var content string
		if fi.Mode()&fs.ModeSymlink != 0 {
			content, err = os.Readlink(p)
		} else {
			var b []byte
			b, err = os.ReadFile(p)
			content = string(b)
		}
		if err != nil {
			return err
		}
		perm := ""
		if fi.Mode().IsRegular() {
			perm = fmt.Sprintf("%04o ", fi.Mode().Perm())
		}
		out = append(out, filepath.ToSlash(rel)+" "+ModeOf(fi.Mode()).String()+" "+perm+content)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(out)
	return strings.Join(out, "\n")
}

func copyTree(t testing.TB, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		target := filepath.Join(dst, rel)
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			return os.MkdirAll(target, 0o755)
		case fi.Mode()&fs.ModeSymlink != 0:
			l, err := os.Readlink(p)
			if err != nil {
				return err
			}
			return os.Symlink(l, target)
		default:
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			if err := os.WriteFile(target, b, fi.Mode().Perm()); err != nil {
				return err
			}
			return os.Chmod(target, fi.Mode().Perm())
		}
	})
	if err != nil {
		t.Fatal(err)
	}
}

// gitEnv isolates git from the user's and system configuration.
func gitEnv(t testing.TB) []string {
	home := t.TempDir()
	return append(os.Environ(), "HOME="+home, "XDG_CONFIG_HOME="+home, "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null")
}

func run(t testing.TB, dir string, env []string, name string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func snapshot(t testing.TB, cp *Checkpointer, root string) *Manifest {
	t.Helper()
	m, err := cp.Snapshot(context.Background(), root)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// fastTempDir is a temporary directory on tmpfs (/dev/shm) when there is
// one, for tests that create thousands of small trees: on the virtual disks
// of CI machines each mkdir costs about half a millisecond.
func fastTempDir(t testing.TB) string {
	t.Helper()
	if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
		if dir, err := os.MkdirTemp("/dev/shm", "decree-checkpoint-test-"); err == nil {
			t.Cleanup(func() { os.RemoveAll(dir) })
			return dir
		}
	}
	return t.TempDir()
}

// runOracle copies the tree from into a new directory, runs args there (git
// apply, GNU patch) and compares state of the result with want.
func runOracle(t *testing.T, tool, from string, args []string, want string, diff []byte, state func(testing.TB, string) string) {
	t.Helper()
	dir := t.TempDir()
	copyTree(t, from, dir)
	if out, err := run(t, dir, gitEnv(t), args[0], args[1:]...); err != nil {
		t.Fatalf("%s failed: %v\n%s\ndiff:\n%s", tool, err, out, diff)
	}
	if got := state(t, dir); got != want {
		t.Fatalf("%s: tree differs\n got: %q\nwant: %q\ndiff:\n%s", tool, got, want, diff)
	}
}
