package merge

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/decreehq/decree/internal/testtool"
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

// checkText3 compares text3 with git merge-file on one input: the same
// verdict, and byte-identical output when clean.
func checkText3(t *testing.T, git, dir string, base, ours, theirs []byte) {
	t.Helper()
	want, clean := gitMerge(t, git, dir, base, ours, theirs)
	got, spans := text3(base, ours, theirs)
	switch {
	case clean && len(spans) > 0:
		t.Fatalf("git merges cleanly, text3 reports conflicts %v\nbase:\n%q\nours:\n%q\ntheirs:\n%q\ngit:\n%q", spans, base, ours, theirs, want)
	case !clean && len(spans) == 0:
		t.Fatalf("git reports conflicts, text3 merges cleanly\nbase:\n%q\nours:\n%q\ntheirs:\n%q\ngit:\n%s\ntext3:\n%q", base, ours, theirs, want, got)
	case clean && !bytes.Equal(got, want):
		t.Fatalf("clean merges differ\nbase:\n%q\nours:\n%q\ntheirs:\n%q\ngit:\n%q\ntext3:\n%q", base, ours, theirs, want, got)
	}
}
