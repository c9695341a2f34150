package checkpoint

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/decreehq/decree/internal/testtool"
)

// permCase is a tree with exact permission bits before a routine and the
// routine's changes: chmods and writes.
type permCase struct {
	name   string
	before map[string]fs.FileMode // path -> permission; content is the path
	chmod  map[string]fs.FileMode
	write  map[string]fs.FileMode // new content, written with this permission
	remove []string
}

var permCases = []permCase{
	// The case: chmod 700 of a 644 file (git sees 100644 -> 100755).
	{name: "chmod-700-of-644", before: map[string]fs.FileMode{"a.txt": 0o644, "keep": 0o644}, chmod: map[string]fs.FileMode{"a.txt": 0o700}},
	// chmod 600 changes no git mode: no diff section, but revert restores it.
	{name: "chmod-600-of-644", before: map[string]fs.FileMode{"a.txt": 0o644, "keep": 0o644}, chmod: map[string]fs.FileMode{"a.txt": 0o600}},
	{name: "chmod-755-of-700", before: map[string]fs.FileMode{"run.sh": 0o700, "keep": 0o644}, chmod: map[string]fs.FileMode{"run.sh": 0o755}},
	{name: "chmod-644-of-750-and-edit", before: map[string]fs.FileMode{"run.sh": 0o750, "keep": 0o640}, chmod: map[string]fs.FileMode{"run.sh": 0o644}, write: map[string]fs.FileMode{"keep": 0o640}},
	{name: "delete-0600-file", before: map[string]fs.FileMode{"secret": 0o600, "keep": 0o644}, remove: []string{"secret"}},
	{name: "new-0600-file", before: map[string]fs.FileMode{"keep": 0o644}, write: map[string]fs.FileMode{"new": 0o600}},
	{name: "edit-keeps-0600", before: map[string]fs.FileMode{"secret": 0o600, "keep": 0o644}, write: map[string]fs.FileMode{"secret": 0o600}},
}

func writePermTree(t *testing.T, root string, files map[string]fs.FileMode) {
	t.Helper()
	for p, perm := range files {
		abs := filepath.Join(root, p)
		if err := os.WriteFile(abs, []byte(p+"\n"), perm); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(abs, perm); err != nil {
			t.Fatal(err)
		}
	}
}

func runPermCase(t *testing.T, root string, tc permCase) {
	t.Helper()
	for p, perm := range tc.chmod {
		if err := os.Chmod(filepath.Join(root, p), perm); err != nil {
			t.Fatal(err)
		}
	}
	for p, perm := range tc.write {
		abs := filepath.Join(root, p)
		if err := os.WriteFile(abs, []byte("changed "+p+"\n"), perm); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(abs, perm); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range tc.remove {
		if err := os.Remove(filepath.Join(root, p)); err != nil {
			t.Fatal(err)
		}
	}
}

// gitState is treeState without the permission bits git does not track:
// what git apply and GNU patch can be held to.
var permField = regexp.MustCompile(`(?m)^(\S+ (?:644|755)) \d{4} `)

func gitState(t testing.TB, root string) string {
	return permField.ReplaceAllString(treeState(t, root), "$1 ")
}

// TestRevertRestoresExactPermissions: the manifest records the real
// permission bits, every way of putting a tree back (Revert of the diff,
// Restore, RevertFile reading only section headers) restores them
// exactly, and the diff still speaks git's 100644/100755, which git apply
// and GNU patch accept forward and in reverse.
func TestRevertRestoresExactPermissions(t *testing.T) {
	testtool.Require(t, "git")
	testtool.Require(t, "patch")
	ctx := context.Background()
	for _, tc := range permCases {
		for _, how := range []string{"Revert", "Restore", "RevertFile-headers"} {
			t.Run(tc.name+"/"+how, func(t *testing.T) {
				cp := newCP(t)
				root := t.TempDir()
				writePermTree(t, root, tc.before)
				before := snapshot(t, cp, root)
				for p, perm := range tc.before {
					if perm != 0o644 && perm != 0o755 && before.Perms[p] != perm {
						t.Fatalf("manifest records %s as %04o, want %04o", p, before.PermOf(p), perm)
					}
				}
				want0 := treeState(t, root)
				pre := t.TempDir()
				copyTree(t, root, pre)
				runPermCase(t, root, tc)
				want1 := treeState(t, root)
				diff, after, err := cp.Diff(ctx, root, before)
				if err != nil {
					t.Fatal(err)
				}
				for p := range tc.chmod {
					if got, want := after.PermOf(p), tc.chmod[p]; got != want {
						t.Fatalf("after manifest: %s %04o, want %04o", p, got, want)
					}
				}
				if strings.Contains(string(diff), "100600") || strings.Contains(string(diff), "100700") {
					t.Fatalf("diff has a mode git does not know:\n%s", diff)
				}
				if len(diff) > 0 {
					patchFile := filepath.Join(t.TempDir(), "changes.diff")
					if err := os.WriteFile(patchFile, diff, 0o644); err != nil {
						t.Fatal(err)
					}
					check := func(tool, from string, args []string, want string) {
						t.Helper()
						runOracle(t, tool, from, args, want, diff, gitState)
					}
					g0, g1 := permField.ReplaceAllString(want0, "$1 "), permField.ReplaceAllString(want1, "$1 ")
					check("git apply", pre, []string{"git", "apply", patchFile}, g1)
					check("git apply -R", root, []string{"git", "apply", "-R", patchFile}, g0)
					check("patch -p1", pre, []string{"patch", "-p1", "--batch", "-s", "-i", patchFile}, g1)
					check("patch -p1 -R", root, []string{"patch", "-p1", "-R", "--batch", "-s", "-i", patchFile}, g0)
				}
				switch how {
				case "Revert":
					err = cp.Revert(ctx, root, diff, before)
				case "Restore":
					_, err = cp.Restore(ctx, root, before)
				case "RevertFile-headers":
					old := inMemoryDiffLimit
					inMemoryDiffLimit = -1
					defer func() { inMemoryDiffLimit = old }()
					path := filepath.Join(t.TempDir(), "changes.diff")
					if err := os.WriteFile(path, diff, 0o644); err != nil {
						t.Fatal(err)
					}
					err = cp.RevertFile(ctx, root, path, before)
				}
				if err != nil {
					t.Fatalf("%s: %v\n%s", how, err, diff)
				}
				if got := treeState(t, root); got != want0 {
					t.Fatalf("%s: tree differs\n got: %q\nwant: %q", how, got, want0)
				}
			})
		}
	}
}

// TestManifestPermRoundTrip: exact bits survive manifest.json; a "perm"
// that is not octal, too large or disagrees with the mode is refused.
func TestManifestPermRoundTrip(t *testing.T) {
	cp := newCP(t)
	root := t.TempDir()
	writePermTree(t, root, map[string]fs.FileMode{"secret": 0o600, "tool": 0o700, "plain": 0o644, "run": 0o755})
	m := snapshot(t, cp, root)
	data, err := MarshalManifest(m)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), `"perm": "600"`) || !strings.Contains(string(data), `"perm": "700"`) || strings.Count(string(data), `"perm"`) != 2 {
		t.Fatalf("perm lines missing or extra:\n%s", data)
	}
	back, err := UnmarshalManifest(data)
	if err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]fs.FileMode{"secret": 0o600, "tool": 0o700, "plain": 0o644, "run": 0o755} {
		if got := back.PermOf(p); got != want {
			t.Errorf("%s: %04o, want %04o", p, got, want)
		}
	}
	if !back.ExactPerms {
		t.Error("exact_perms lost")
	}
	sum := strings.Repeat("a", 64)
	for _, bad := range []string{`"9x9"`, `"1777"`, `"755"`, `"-1"`} {
		doc := `{"files": {"f": {"sha256": "` + sum + `", "size": 1, "mode": "644", "perm": ` + bad + `}}}`
		if _, err := UnmarshalManifest([]byte(doc)); err == nil || !strings.Contains(err.Error(), "perm") {
			t.Errorf("perm %s: err %v, want a perm error", bad, err)
		}
	}
}

// TestOldManifestKeepsUntrackedBits: a manifest written before decree
// recorded permission bits (no exact_perms) does not reset a 0600 file to
// 0644 when restoring.
func TestOldManifestKeepsUntrackedBits(t *testing.T) {
	cp := newCP(t)
	root := t.TempDir()
	writePermTree(t, root, map[string]fs.FileMode{"secret": 0o600, "other": 0o644})
	m := snapshot(t, cp, root)
	old := &Manifest{Files: m.Files} // as read from an old manifest.json
	if err := os.WriteFile(filepath.Join(root, "other"), []byte("x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := cp.Restore(context.Background(), root, old); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(filepath.Join(root, "secret")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("secret: %v %v, want 0600 kept", fi.Mode(), err)
	}
}
