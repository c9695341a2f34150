package ignore

import (
	"bytes"
	"context"
	"fmt"
	"github.com/decreehq/decree/internal/testtool"
	"io/fs"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// files of the standard test tree; ignore files are added per case.
var treeFiles = []string{
	"a.txt", "a.log", "b.log", "x/y", "y", "sub/y", "sub/x/y", "sub/a.log", "sub/deep/a.log",
	"logs/one.log", "logs/keep/k.log", "logs/keep/sub/k2", "logs/other/o.txt", "sub/logs/n.log",
	"a/b", "a/x/b", "a/x/y/b", "a/b/c", "build/out.o", "src/build/x.o", "src/main.go",
	"foo bar.txt", "trail ", "#hash", "!bang", "star*", "q?", "br[ack]et", "dir/file", "dir/sub/file",
	"doc/frotz/x", "a/doc/frotz/y", "abc", "Abc", "node_modules/m/i.js", "sub/node_modules/j.js",
}

type ignoreCase struct {
	name  string
	rules map[string]string // ignore file path -> content
}

var ignoreCases = []ignoreCase{
	{"logs-starstar-reinclude", map[string]string{".gitignore": "logs/**\n!logs/keep/\n"}},
	{"logs-starstar-reinclude-files", map[string]string{".gitignore": "logs/**\n!logs/keep/\n!logs/keep/**\n"}},
	{"logs-dir-reinclude-impossible", map[string]string{".gitignore": "logs/\n!logs/keep/\n"}},
	{"anchored", map[string]string{".gitignore": "/x\n/sub/a.log\n"}},
	{"dir-only", map[string]string{".gitignore": "x/\ny/\n"}},
	{"leading-starstar", map[string]string{".gitignore": "**/y\n**/logs/*.log\n"}},
	{"middle-starstar", map[string]string{".gitignore": "a/**/b\n"}},
	{"trailing-starstar", map[string]string{".gitignore": "sub/**\n"}},
	{"negation", map[string]string{".gitignore": "*.log\n!b.log\n!sub/deep/a.log\n"}},
	{"escaped", map[string]string{".gitignore": "\\#hash\n\\!bang\nstar\\*\nq\\?\nbr\\[ack]et\n"}},
	{"trailing-spaces", map[string]string{".gitignore": "a.txt   \ntrail\\ \nfoo bar.txt\n"}},
	{"comments-and-blank", map[string]string{".gitignore": "# a.txt\n\n   \nabc\r\n"}},
	{"nested", map[string]string{".gitignore": "*.log\n", "sub/.gitignore": "!a.log\ny\n", "sub/deep/.gitignore": "*.log\n"}},
	{"nested-anchored", map[string]string{"sub/.gitignore": "/y\n/x/\n", "a/.gitignore": "/x/y\n"}},
	{"nested-slash-middle", map[string]string{"a/.gitignore": "doc/frotz\n", ".gitignore": "doc/frotz/\n"}},
	{"classes", map[string]string{".gitignore": "[a-b].log\n[[:upper:]]bc\n[!s]ub\n"}},
	{"star-only", map[string]string{".gitignore": "*\n!*/\n!*.go\n"}},
	{"single-star-dirs", map[string]string{".gitignore": "*/b\n*/x/*\n"}},
	{"question", map[string]string{".gitignore": "?.log\nsu?/*.log\n"}},
	{"node-modules", map[string]string{".gitignore": "node_modules\n"}},
	{"build-dir-with-negated-file", map[string]string{".gitignore": "build/\n!build/out.o\n"}},
	{"double-star-alone", map[string]string{".gitignore": "**\n!*.txt\n!*/\n"}},
	{"starstar-no-slash", map[string]string{".gitignore": "a**b\nsu**\n"}},
	{"ignored-gitignore", map[string]string{".gitignore": ".gitignore\nsub/\n", "sub/.gitignore": "!y\n"}},
}

func writeTree(t *testing.T, dir string, files []string, rules map[string]string) {
	t.Helper()
	for _, f := range files {
		p := filepath.Join(dir, filepath.FromSlash(f))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			continue // a parent is already a file in this random tree
		}
		// A name used both as a file and as a directory keeps the directory.
		if fi, err := os.Stat(p); err == nil && fi.IsDir() {
			continue
		}
		if err := os.WriteFile(p, []byte(f), 0o644); err != nil {
			// p's parent may be a file: skip this one.
			continue
		}
	}
	for f, content := range rules {
		p := filepath.Join(dir, filepath.FromSlash(f))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func walkList(t *testing.T, root string) []string {
	t.Helper()
	var got []string
	err := Walk(context.Background(), root, func(rel string, info fs.FileInfo) error {
		got = append(got, rel)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(got)
	return got
}

// gitEnv isolates git from the user's and system configuration.
func gitEnv(home string) []string {
	return append(os.Environ(), "HOME="+home, "XDG_CONFIG_HOME="+home, "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null")
}

func gitList(t *testing.T, root string, args ...string) []string {
	t.Helper()
	if _, err := os.Stat(filepath.Join(root, ".git")); err != nil {
		cmd := exec.Command("git", "init", "-q", root)
		cmd.Env = gitEnv(t.TempDir())
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git init: %v\n%s", err, out)
		}
	}
	cmd := exec.Command("git", append([]string{"-C", root, "ls-files", "--others", "-z"}, args...)...)
	cmd.Env = gitEnv(t.TempDir())
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("git ls-files: %v", err)
	}
	var list []string
	for _, s := range bytes.Split(out, []byte{0}) {
		if len(s) > 0 {
			list = append(list, string(s))
		}
	}
	sort.Strings(list)
	return list
}

func diffLists(a, b []string) string {
	in := map[string]int{}
	for _, s := range a {
		in[s] |= 1
	}
	for _, s := range b {
		in[s] |= 2
	}
	var out []string
	for s, v := range in {
		switch v {
		case 1:
			out = append(out, "only walk: "+s)
		case 2:
			out = append(out, "only git:  "+s)
		}
	}
	sort.Strings(out)
	return strings.Join(out, "\n")
}

func TestWalkMatchesGit(t *testing.T) {
	testtool.Require(t, "git")
	for _, tc := range ignoreCases {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			writeTree(t, root, treeFiles, tc.rules)
			got := walkList(t, root)
			want := gitList(t, root, "--exclude-standard")
			if d := diffLists(got, want); d != "" {
				t.Errorf("walk and git ls-files disagree for rules %q:\n%s", tc.rules, d)
			}
		})
	}
}

// TestDecreeIgnoreSameSyntax runs every case again with the rules in
// .decreeignore files, compared with git reading .decreeignore as its
// per-directory exclude file.
func TestDecreeIgnoreSameSyntax(t *testing.T) {
	testtool.Require(t, "git")
	for _, tc := range ignoreCases {
		t.Run(tc.name, func(t *testing.T) {
			rules := map[string]string{}
			for p, c := range tc.rules {
				rules[strings.TrimSuffix(p, GitIgnoreFile)+DecreeIgnoreFile] = strings.ReplaceAll(c, GitIgnoreFile, DecreeIgnoreFile)
			}
			root := t.TempDir()
			writeTree(t, root, treeFiles, rules)
			got := walkList(t, root)
			want := gitList(t, root, "--exclude-per-directory="+DecreeIgnoreFile)
			if d := diffLists(got, want); d != "" {
				t.Errorf("walk and git disagree for .decreeignore rules %q:\n%s", rules, d)
			}
		})
	}
}

// TestRandomRulesMatchGit generates random trees and random rule sets from a
// pool of tricky patterns and compares with git.
func TestRandomRulesMatchGit(t *testing.T) {
	testtool.Require(t, "git")
	pool := []string{
		"*.log", "!*.log", "a", "/a", "a/", "!a/", "b", "!b", "**/b", "a/**", "!a/**", "a/**/b", "**/c/*",
		"*/b", "c", "/c/", "!c", "?", "[ab]", "[!a]*", "a*", "*b", "**", "!**/", "x/**/", "!x/y", "d*/",
		"\\!n", "a\\*", "c/*.log", "/*/a", "!/b", "**/x/**", "x", "!x/", "y/z", "**/", "*", "!*/",
	}
	names := []string{"a", "b", "c", "x", "y", "z", "d1", "a.log", "b.log", "!n", "a*"}
	rng := rand.New(rand.NewSource(42))
	for iter := 0; iter < 40; iter++ {
		root := t.TempDir()
		var files []string
		for i := 0; i < 30; i++ {
			depth := 1 + rng.Intn(4)
			parts := make([]string, depth)
			for j := range parts {
				parts[j] = names[rng.Intn(len(names))]
			}
			files = append(files, strings.Join(parts, "/"))
		}
		rules := map[string]string{}
		dirs := []string{"", "a/", "x/", "a/b/", "c/"}
		for _, d := range dirs {
			if rng.Intn(2) == 0 && d != "" {
				continue
			}
			var lines []string
			for n := rng.Intn(5) + 1; n > 0; n-- {
				lines = append(lines, pool[rng.Intn(len(pool))])
			}
			rules[d+GitIgnoreFile] = strings.Join(lines, "\n") + "\n"
		}
		// Ignore files must not land under a path that is a file.
		writeTree(t, root, files, nil)
		for p, c := range rules {
			full := filepath.Join(root, filepath.FromSlash(p))
			if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
				delete(rules, p)
				continue
			}
			if err := os.WriteFile(full, []byte(c), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		got := walkList(t, root)
		want := gitList(t, root, "--exclude-standard")
		if d := diffLists(got, want); d != "" {
			t.Fatalf("case %d: walk and git disagree\nrules: %q\nfiles: %q\n%s", iter, rules, files, d)
		}
	}
}

// TestDecreeIgnoreOverridesGitignore pins the precedence decree adds on top
// of git: .decreeignore decides first, at any depth.
func TestDecreeIgnoreOverridesGitignore(t *testing.T) {
	root := t.TempDir()
	writeTree(t, root, []string{"build/out.o", "keep.log", "x.log", "src/a.go", "src/gen.go", "src/sub/gen.go"}, map[string]string{
		".gitignore":     "build/\n*.log\n",
		".decreeignore":  "!build/\n!keep.log\ngen.go\n",
		"src/.gitignore": "!gen.go\n",
	})
	got := walkList(t, root)
	want := []string{".decreeignore", ".gitignore", "build/out.o", "keep.log", "src/.gitignore", "src/a.go"}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("got %q, want %q", got, want)
	}
}

func TestAlwaysSkipped(t *testing.T) {
	root := t.TempDir()
	writeTree(t, root, []string{".git/config", ".decree/runs/x", "sub/.git", "sub/.decree/y", "sub/ok", "a"}, map[string]string{
		".gitignore": "!.git\n!.decree/\n",
	})
	got := walkList(t, root)
	want := []string{".gitignore", "a", "sub/ok"}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("got %q, want %q", got, want)
	}
}

func TestMatcherAgreesWithWalk(t *testing.T) {
	for _, tc := range ignoreCases {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			writeTree(t, root, treeFiles, tc.rules)
			walked := map[string]bool{}
			for _, p := range walkList(t, root) {
				walked[p] = true
			}
			m := NewMatcher(root)
			err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
				if err != nil || d.IsDir() {
					return err
				}
				rel, _ := filepath.Rel(root, p)
				rel = filepath.ToSlash(rel)
				ign, err := m.Ignored(rel, false)
				if err != nil {
					return err
				}
				if ign == walked[rel] {
					return fmt.Errorf("%s: Matcher.Ignored=%v but Walk listed=%v", rel, ign, walked[rel])
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestWildmatchTable(t *testing.T) {
	tests := []struct {
		pat, text string
		want      bool
	}{
		{"foo", "foo", true},
		{"foo", "bar", false},
		{"*", "foo/bar", false},
		{"**", "foo/bar", true},
		{"foo/**", "foo", false},
		{"foo/**", "foo/a/b", true},
		{"**/foo", "foo", true},
		{"**/foo", "a/b/foo", true},
		{"a/**/b", "a/b", true},
		{"a/**/b", "a/x/y/b", true},
		{"a/**/b", "a/xb", false},
		{"a**b", "axxb", true},
		{"a**b", "a/b", false},
		{"*/b", "a/b", true},
		{"*/b", "a/c/b", false},
		{"[a-c]x", "bx", true},
		{"[!a-c]x", "bx", false},
		{"[^a-c]x", "dx", true},
		{"[]]", "]", true},
		{"[[:digit:]]", "5", true},
		{"[[:digit:]]", "a", false},
		{"\\*", "*", true},
		{"\\*", "a", false},
		{"a?c", "a/c", false},
		{"[/]", "/", false},
		{"**/x*y", "a/q/xz/xy", true},
		{"x*y", "xz/xy", false},
	}
	for _, tt := range tests {
		if got := wildmatch(tt.pat, tt.text); got != tt.want {
			t.Errorf("wildmatch(%q, %q) = %v, want %v", tt.pat, tt.text, got, tt.want)
		}
	}
}
