package merge

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/decreehq/decree/internal/testtool"
	"github.com/decreehq/decree/pkg/checkpoint"
)

// needGit returns git's path, for use as an oracle. Missing git skips the
// test locally and fails it in CI (DECREE_REQUIRE_TOOLS=1, or CI set).
func needGit(t *testing.T) string {
	t.Helper()
	if os.Getenv("CI") != "" {
		if _, err := exec.LookPath("git"); err != nil {
			t.Fatalf("git is required in CI (CI is set) as the merge oracle, but not found: %v", err)
		}
	}
	return testtool.Require(t, "git")
}

// gitMerge runs `git merge-file -p ours base theirs` in dir and returns
// its output and whether it reported a clean merge (exit 0) or conflicts
// (exit 1 to 127). Any other outcome fails the test.
func gitMerge(t *testing.T, git, dir string, base, ours, theirs []byte) ([]byte, bool) {
	t.Helper()
	names := []string{"ours", "base", "theirs"}
	for i, data := range [][]byte{ours, base, theirs} {
		if err := os.WriteFile(filepath.Join(dir, names[i]), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(git, "merge-file", "-p", "ours", "base", "theirs")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL="+os.DevNull, "HOME="+dir)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return stdout.Bytes(), true
	case errors.As(err, &exit) && exit.ExitCode() >= 1 && exit.ExitCode() <= 127:
		return stdout.Bytes(), false
	}
	t.Fatalf("git merge-file: %v\n%s", err, stderr.String())
	return nil, false
}

// oracle is git merge-file with a scratch directory, and a store for
// Trees.
type oracle struct {
	git, dir string
	st       *checkpoint.Store
}

func newOracle(t *testing.T) *oracle {
	t.Helper()
	git := needGit(t)
	st, err := checkpoint.OpenStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return &oracle{git: git, dir: t.TempDir(), st: st}
}

// check compares Trees, on a tree of one file, with git merge-file: the
// same verdict, and byte-identical content when clean. It returns git's
// verdict.
func (or *oracle) check(t *testing.T, base, ours, theirs []byte) (clean bool) {
	t.Helper()
	st := or.st
	want, clean := gitMerge(t, or.git, or.dir, base, ours, theirs)
	one := func(data []byte) *checkpoint.Manifest { return manifest(t, st, tree{"f": txt(string(data))}) }
	res, err := Trees(context.Background(), st, one(base), one(ours), one(theirs))
	if err != nil {
		t.Fatal(err)
	}
	var got []byte
	if res.Tree != nil {
		got = []byte(readTree(t, st, res.Tree)["f"].data)
	}
	switch {
	case clean && res.Tree == nil:
		t.Fatalf("git merges cleanly, Trees reports %v\nbase:\n%q\nours:\n%q\ntheirs:\n%q\ngit:\n%q", res.Conflicts, base, ours, theirs, want)
	case !clean && res.Tree != nil:
		t.Fatalf("git reports conflicts, Trees merges cleanly\nbase:\n%q\nours:\n%q\ntheirs:\n%q\ngit:\n%s\nTrees:\n%q", base, ours, theirs, want, got)
	case clean && !bytes.Equal(got, want):
		t.Fatalf("clean merges differ\nbase:\n%q\nours:\n%q\ntheirs:\n%q\ngit:\n%q\nTrees:\n%q", base, ours, theirs, want, got)
	case !clean && (len(res.Conflicts) != 1 || res.Conflicts[0].Path != "f"):
		t.Fatalf("conflicts %v, want one on f", res.Conflicts)
	}
	return clean
}
