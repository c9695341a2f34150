package checkpoint

import (
	"context"
	"fmt"
	"github.com/decreehq/decree/internal/testtool"
	"github.com/decreehq/decree/pkg/fsutil"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func numbered(n int, f func(i int) string) string {
	var b strings.Builder
	for i := 1; i <= n; i++ {
		b.WriteString(f(i))
	}
	return b.String()
}

var lines40 = numbered(40, func(i int) string { return fmt.Sprintf("line %d\n", i) })

// diffCase is a tree before and after a change. gnu says whether GNU patch
// can apply the diff: GNU patch cannot read git binary patches, refuses to
// replace a file by a directory or back in either direction, and applies
// sections one by one, so a symlink that becomes a file (or back) only
// works in the direction git's section order suits. git apply and Apply
// handle every case in both directions.
type diffCase struct {
	name   string
	before map[string]spec
	after  map[string]spec // entries to write; nil spec data with mode 0 deletes
	remove []string
	gnu    string // "both", "forward", "reverse", "none"
}

var diffCases = []diffCase{
	{name: "modify-text", before: map[string]spec{"a.txt": file(lines40)},
		after: map[string]spec{"a.txt": file(strings.Replace(strings.Replace(strings.Replace(lines40, "line 2\n", "two\n", 1), "line 20\n", "", 1), "line 39\n", "line 39\nextra\n", 1))}, gnu: "both"},
	{name: "new-file", before: map[string]spec{"keep": file("k\n")}, after: map[string]spec{"dir/new.txt": file("hello\nworld\n")}, gnu: "both"},
	{name: "delete-file", before: map[string]spec{"keep": file("k\n"), "dir/old.txt": file("bye\n")}, remove: []string{"dir/old.txt"}, gnu: "both"},
	{name: "binary-modify", before: map[string]spec{"b.bin": file("\x00\x01\x02binary" + strings.Repeat("x", 300))}, after: map[string]spec{"b.bin": file("\x00\x01\x03binary" + strings.Repeat("y", 200))}, gnu: "none"},
	{name: "binary-new-delete", before: map[string]spec{"old.bin": file("\x00old")}, after: map[string]spec{"new.bin": file("\x00\xff\xfe new")}, remove: []string{"old.bin"}, gnu: "none"},
	{name: "text-to-binary", before: map[string]spec{"t": file("text\n")}, after: map[string]spec{"t": file("bin\x00ary")}, gnu: "none"},
	{name: "mode-only", before: map[string]spec{"run.sh": file("#!/bin/sh\necho hi\n")}, after: map[string]spec{"run.sh": exe("#!/bin/sh\necho hi\n")}, gnu: "both"},
	{name: "mode-and-content", before: map[string]spec{"run.sh": exe("#!/bin/sh\necho hi\n")}, after: map[string]spec{"run.sh": file("#!/bin/sh\necho bye\n")}, gnu: "both"},
	{name: "empty-files", before: map[string]spec{"empty-old": file(""), "fill": file(""), "drain": file("x\ny\n")},
		after: map[string]spec{"empty-new": file(""), "fill": file("now\nfull\n"), "drain": file("")}, remove: []string{"empty-old"}, gnu: "both"},
	{name: "no-trailing-newline", before: map[string]spec{"a": file("one\ntwo"), "b": file("one\ntwo\n"), "c": file("x")},
		after: map[string]spec{"a": file("one\ntwo\n"), "b": file("one\ntwo"), "c": file("y")}, gnu: "both"},
	{name: "crlf", before: map[string]spec{"w.txt": file("a\r\nb\r\nc\r\n")}, after: map[string]spec{"w.txt": file("a\r\nB\r\nc\r\nd\n")}, gnu: "both"},
	{name: "symlinks", before: map[string]spec{"target": file("t\n"), "l1": link("target"), "l2": link("target"), "l3": link("gone")},
		after: map[string]spec{"l1": link("../outside/of/tree"), "l4": link("/etc/passwd")}, remove: []string{"l3"}, gnu: "both"},
	{name: "symlink-to-file-and-back", before: map[string]spec{"a": link("x"), "b": file("b\n")}, after: map[string]spec{"a": file("now a file\n"), "b": link("a")}, gnu: "forward"},
	{name: "file-replaced-by-directory", before: map[string]spec{"x": file("x\n")}, after: map[string]spec{"x/y": file("y\n"), "x/z/w": file("w\n")}, remove: []string{"x"}, gnu: "none"},
	{name: "directory-replaced-by-file", before: map[string]spec{"x/y": file("y\n"), "x/z/w": file("w\n")}, after: map[string]spec{"x": file("x\n")}, remove: []string{"x/y", "x/z/w"}, gnu: "none"},
	{name: "odd-names", before: map[string]spec{"with space.txt": file("a\n"), "ünïcødé.txt": file("u\n"), `quo"te`: file("q\n")},
		after: map[string]spec{"with space.txt": file("b\n"), "ünïcødé.txt": file("v\n"), "new dir/new file": file("n\n"), "semi;colon 'q'": file("s\n")}, remove: []string{`quo"te`}, gnu: "both"},
	{name: "many-hunks", before: map[string]spec{"big": file(numbered(500, func(i int) string { return fmt.Sprintf("%d\n", i) }))},
		after: map[string]spec{"big": file(numbered(500, func(i int) string {
			if i%37 == 0 {
				return fmt.Sprintf("changed %d\n", i)
			}
			if i%91 == 0 {
				return ""
			}
			return fmt.Sprintf("%d\n", i)
		}))}, gnu: "both"},
}

func applyCase(t *testing.T, root string, tc diffCase) {
	for _, p := range tc.remove {
		if err := os.Remove(filepath.Join(root, filepath.FromSlash(p))); err != nil {
			t.Fatal(err)
		}
		fsutil.RemoveEmptyParents(root, filepath.Dir(filepath.Join(root, filepath.FromSlash(p))))
	}
	writeSpec(t, root, tc.after)
}

// TestDiffOracles produces a diff per case and applies it with real git
// apply and GNU patch, forward and reverse, and with Apply/Revert; every
// result must equal the expected tree byte for byte.
func TestDiffOracles(t *testing.T) {
	testtool.Require(t, "git")
	testtool.Require(t, "patch")
	ctx := context.Background()
	for _, tc := range diffCases {
		t.Run(tc.name, func(t *testing.T) {
			cp := newCP(t)
			root := t.TempDir()
			writeSpec(t, root, tc.before)
			before := snapshot(t, cp, root)
			want0 := treeState(t, root)
			pre := t.TempDir()
			copyTree(t, root, pre)
			applyCase(t, root, tc)
			want1 := treeState(t, root)
			diff, after, err := cp.Diff(ctx, root, before)
			if err != nil {
				t.Fatal(err)
			}
			if len(diff) == 0 {
				t.Fatal("empty diff")
			}
			patchFile := filepath.Join(t.TempDir(), "changes.diff")
			if err := os.WriteFile(patchFile, diff, 0o644); err != nil {
				t.Fatal(err)
			}
			check := func(tool string, from string, args []string, want string) {
				t.Helper()
				runOracle(t, tool, from, args, want, diff, treeState)
			}
			check("git apply", pre, []string{"git", "apply", patchFile}, want1)
			check("git apply -R", root, []string{"git", "apply", "-R", patchFile}, want0)
			if tc.gnu == "both" || tc.gnu == "forward" {
				check("patch -p1", pre, []string{"patch", "-p1", "--batch", "-s", "-i", patchFile}, want1)
			}
			if tc.gnu == "both" || tc.gnu == "reverse" {
				check("patch -p1 -R", root, []string{"patch", "-p1", "-R", "--batch", "-s", "-i", patchFile}, want0)
			}
			// Our own Apply, forward on a copy of the old tree.
			fwd := t.TempDir()
			copyTree(t, pre, fwd)
			if err := cp.Apply(ctx, fwd, diff, false, after); err != nil {
				t.Fatalf("Apply forward: %v\n%s", err, diff)
			}
			if got := treeState(t, fwd); got != want1 {
				t.Fatalf("Apply forward: tree differs\n got: %q\nwant: %q", got, want1)
			}
			// Revert in place.
			if err := cp.Revert(ctx, root, diff, before); err != nil {
				t.Fatalf("Revert: %v\n%s", err, diff)
			}
			if got := treeState(t, root); got != want0 {
				t.Fatalf("Revert: tree differs\n got: %q\nwant: %q", got, want0)
			}
			if m := snapshot(t, cp, root); !m.Equal(before) {
				t.Fatalf("Revert: manifest differs")
			}
		})
	}
}
