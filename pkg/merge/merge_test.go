package merge

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io/fs"
	"slices"
	"strings"
	"testing"

	"github.com/decreehq/decree/pkg/checkpoint"
)

// fspec is one path in a test tree: a regular file with content and
// permission bits, or a symlink.
type fspec struct {
	data string
	perm fs.FileMode
	link bool
}

func txt(s string) fspec                     { return fspec{data: s, perm: 0o644} }
func withPerm(s string, p fs.FileMode) fspec { return fspec{data: s, perm: p} }
func symlink(target string) fspec            { return fspec{data: target, link: true} }

type tree map[string]fspec

// manifest records tr in a manifest, storing every file content in st.
func manifest(t *testing.T, st *checkpoint.Store, tr tree) *checkpoint.Manifest {
	t.Helper()
	m := &checkpoint.Manifest{Files: map[string]checkpoint.Entry{}, ExactPerms: true}
	for p, f := range tr {
		sum := sha256.Sum256([]byte(f.data))
		e := checkpoint.Entry{SHA256: hex.EncodeToString(sum[:]), Size: int64(len(f.data))}
		if f.link {
			e.Mode, e.Link = checkpoint.ModeSymlink, f.data
		} else {
			e.Mode = checkpoint.ModeOf(f.perm)
			if err := st.Put(e.SHA256, []byte(f.data)); err != nil {
				t.Fatal(err)
			}
			if f.perm != e.Mode.Perm() {
				if m.Perms == nil {
					m.Perms = map[string]fs.FileMode{}
				}
				m.Perms[p] = f.perm
			}
		}
		m.Files[p] = e
	}
	return m
}

// readTree reads m back into a tree from st.
func readTree(t *testing.T, st *checkpoint.Store, m *checkpoint.Manifest) tree {
	t.Helper()
	out := tree{}
	for p, e := range m.Files {
		if e.Mode == checkpoint.ModeSymlink {
			out[p] = symlink(e.Link)
			continue
		}
		data, err := st.Get(e.SHA256)
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		if int64(len(data)) != e.Size {
			t.Fatalf("%s: manifest size %d, content %d bytes", p, e.Size, len(data))
		}
		if got := checkpoint.ModeOf(m.PermOf(p)); got != e.Mode {
			t.Fatalf("%s: mode %s disagrees with permission bits %o", p, e.Mode, m.PermOf(p))
		}
		out[p] = withPerm(string(data), m.PermOf(p))
	}
	return out
}

var ten = "1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n"

func tenWith(repl map[string]string) string {
	s := ten
	for old, nw := range repl {
		s = strings.Replace(s, old+"\n", nw, 1)
	}
	return s
}

type mergeCase struct {
	name               string
	base, ours, theirs tree
	want               tree              // the merged tree, when clean
	conflicts          map[string]string // path -> substring of the reason
	changed            []string
}

var mergeCases = []mergeCase{
	{name: "disjoint edits",
		base: tree{"f": txt(ten)}, ours: tree{"f": txt(tenWith(map[string]string{"2": "two\n"}))}, theirs: tree{"f": txt(tenWith(map[string]string{"8": "eight\n"}))},
		want: tree{"f": txt(tenWith(map[string]string{"2": "two\n", "8": "eight\n"}))}, changed: []string{"f"}},
	{name: "same line edited differently",
		base: tree{"f": txt(ten)}, ours: tree{"f": txt(tenWith(map[string]string{"3": "three\n", "4": "four\n"}))}, theirs: tree{"f": txt(tenWith(map[string]string{"3": "THREE\n", "4": "FOUR\n"}))},
		conflicts: map[string]string{"f": "both changed lines 3-4"}},
	{name: "adjacent lines edited",
		base: tree{"f": txt(ten)}, ours: tree{"f": txt(tenWith(map[string]string{"3": "three\n"}))}, theirs: tree{"f": txt(tenWith(map[string]string{"4": "four\n"}))},
		conflicts: map[string]string{"f": "both changed lines 3-4"}},
	{name: "identical edits",
		base: tree{"f": txt(ten), "g": txt("x\n")}, ours: tree{"f": txt(tenWith(map[string]string{"5": "five\n"})), "g": txt("x\n")}, theirs: tree{"f": txt(tenWith(map[string]string{"5": "five\n"})), "g": txt("y\n")},
		want: tree{"f": txt(tenWith(map[string]string{"5": "five\n"})), "g": txt("y\n")}, changed: []string{"g"}},
	{name: "identical edit plus one more",
		base: tree{"f": txt(ten)}, ours: tree{"f": txt(tenWith(map[string]string{"5": "five\n"}))}, theirs: tree{"f": txt(tenWith(map[string]string{"5": "five\n", "9": "nine\n"}))},
		want: tree{"f": txt(tenWith(map[string]string{"5": "five\n", "9": "nine\n"}))}, changed: []string{"f"}},
	{name: "insertions at the same point",
		base: tree{"f": txt(ten)}, ours: tree{"f": txt(tenWith(map[string]string{"5": "5\nours\n"}))}, theirs: tree{"f": txt(tenWith(map[string]string{"5": "5\ntheirs\n"}))},
		conflicts: map[string]string{"f": "both inserted different lines after line 5"}},
	{name: "same insertion at the same point",
		base: tree{"f": txt(ten)}, ours: tree{"f": txt(tenWith(map[string]string{"5": "5\nnew\n", "1": "one\n"}))}, theirs: tree{"f": txt(tenWith(map[string]string{"5": "5\nnew\n"}))},
		want: tree{"f": txt(tenWith(map[string]string{"5": "5\nnew\n", "1": "one\n"}))}},
	{name: "deleted lines vs edit inside them",
		base: tree{"f": txt(ten)}, ours: tree{"f": txt(tenWith(map[string]string{"4": "", "5": "", "6": ""}))}, theirs: tree{"f": txt(tenWith(map[string]string{"5": "five\n"}))},
		conflicts: map[string]string{"f": "both changed lines 4-6"}},
	{name: "deleted lines vs distant edit",
		base: tree{"f": txt(ten)}, ours: tree{"f": txt(tenWith(map[string]string{"2": "", "3": ""}))}, theirs: tree{"f": txt(tenWith(map[string]string{"9": "nine\n"}))},
		want: tree{"f": txt(tenWith(map[string]string{"2": "", "3": "", "9": "nine\n"}))}, changed: []string{"f"}},
	{name: "edits at start and end",
		base: tree{"f": txt(ten)}, ours: tree{"f": txt("zero\n" + tenWith(map[string]string{"1": "one\n"}))}, theirs: tree{"f": txt(tenWith(map[string]string{"10": "ten\neleven\n"}))},
		want: tree{"f": txt("zero\n" + tenWith(map[string]string{"1": "one\n", "10": "ten\neleven\n"}))}, changed: []string{"f"}},
	{name: "both edit the first line",
		base: tree{"f": txt(ten)}, ours: tree{"f": txt(tenWith(map[string]string{"1": "one\n"}))}, theirs: tree{"f": txt(tenWith(map[string]string{"1": "ONE\n"}))},
		conflicts: map[string]string{"f": "both changed line 1"}},
	{name: "one side drops the final newline, the other edits elsewhere",
		base: tree{"f": txt(ten)}, ours: tree{"f": txt(strings.TrimSuffix(ten, "\n"))}, theirs: tree{"f": txt(tenWith(map[string]string{"2": "two\n"}))},
		want: tree{"f": txt(strings.TrimSuffix(tenWith(map[string]string{"2": "two\n"}), "\n"))}, changed: []string{"f"}},
	{name: "final newline dropped vs last line edited",
		base: tree{"f": txt(ten)}, ours: tree{"f": txt(strings.TrimSuffix(ten, "\n"))}, theirs: tree{"f": txt(tenWith(map[string]string{"10": "ten\n"}))},
		conflicts: map[string]string{"f": "both changed line 10"}},
	{name: "no final newline, edit before it",
		base: tree{"f": txt("a\nb\nc\nd\ne")}, ours: tree{"f": txt("A\nb\nc\nd\ne")}, theirs: tree{"f": txt("a\nb\nc\nd\ne\nf")},
		want: tree{"f": txt("A\nb\nc\nd\ne\nf")}, changed: []string{"f"}},
	{name: "CRLF lines",
		base: tree{"f": txt("a\r\nb\r\nc\r\nd\r\ne\r\n")}, ours: tree{"f": txt("A\r\nb\r\nc\r\nd\r\ne\r\n")}, theirs: tree{"f": txt("a\r\nb\r\nc\r\nd\r\nE\r\n")},
		want: tree{"f": txt("A\r\nb\r\nc\r\nd\r\nE\r\n")}, changed: []string{"f"}},
	{name: "CRLF vs LF on one line",
		base: tree{"f": txt("a\nb\nc\n")}, ours: tree{"f": txt("a\nb\r\nc\n")}, theirs: tree{"f": txt("a\nB\nc\n")},
		conflicts: map[string]string{"f": "both changed line 2"}},
	{name: "empty files",
		base: tree{"e": txt(""), "f": txt("x\nz\n")}, ours: tree{"e": txt("ours\n"), "f": txt("z\n")}, theirs: tree{"e": txt(""), "f": txt("x\nz\ny\n")},
		want: tree{"e": txt("ours\n"), "f": txt("z\ny\n")}, changed: []string{"f"}},
	{name: "emptied vs appended",
		base: tree{"f": txt("x\n")}, ours: tree{"f": txt("")}, theirs: tree{"f": txt("x\ny\n")},
		conflicts: map[string]string{"f": "both changed line 1"}},
	{name: "both fill an empty file",
		base: tree{"e": txt("")}, ours: tree{"e": txt("ours\n")}, theirs: tree{"e": txt("theirs\n")},
		conflicts: map[string]string{"e": "both inserted different lines at the start"}},
	{name: "add/add",
		base: tree{}, ours: tree{"same": txt("s\n"), "diff": txt("o\n"), "mode": withPerm("m\n", 0o755)}, theirs: tree{"same": txt("s\n"), "diff": txt("t\n"), "mode": txt("m\n"), "new": txt("n\n")},
		conflicts: map[string]string{"diff": "both added with different content", "mode": "both added with different modes"}, changed: []string{"new"}},
	{name: "delete/delete and one-sided deletes",
		base: tree{"both": txt("b\n"), "mine": txt("m\n"), "yours": txt("y\n")}, ours: tree{"mine": txt("m\n")}, theirs: tree{"yours": txt("y\n")},
		want: tree{}, changed: []string{"mine"}},
	{name: "delete vs modify",
		base: tree{"a": txt("a\n"), "b": txt("b\n")}, ours: tree{"b": txt("B\n")}, theirs: tree{"a": txt("A\n")},
		conflicts: map[string]string{"a": "deleted here, changed by the chain", "b": "changed here, deleted by the chain"}},
	{name: "file here, directory by the chain",
		base: tree{"k": txt("k\n")}, ours: tree{"k": txt("k\n"), "x": txt("x\n")}, theirs: tree{"k": txt("k\n"), "x/y": txt("y\n")},
		conflicts: map[string]string{"x/y": "a file in directory x, which the other side has as a file"}},
	{name: "directory here, file by the chain",
		base: tree{"d/old": txt("o\n")}, ours: tree{"d/old": txt("o\n"), "d/sub/f": txt("f\n")}, theirs: tree{"d": symlink("elsewhere")},
		conflicts: map[string]string{"d": "a file where the other side has a directory (d/sub/f)"}},
	{name: "symlink changed on one side",
		base: tree{"l": symlink("a"), "m": symlink("x")}, ours: tree{"l": symlink("a"), "m": symlink("y")}, theirs: tree{"l": symlink("b"), "m": symlink("x")},
		want: tree{"l": symlink("b"), "m": symlink("y")}, changed: []string{"l"}},
	{name: "symlink changed differently",
		base: tree{"l": symlink("a"), "same": symlink("a")}, ours: tree{"l": symlink("b"), "same": symlink("c")}, theirs: tree{"l": symlink("c"), "same": symlink("c")},
		conflicts: map[string]string{"l": "symlink changed differently"}},
	{name: "file made a symlink vs edited",
		base: tree{"f": txt("a\n")}, ours: tree{"f": symlink("elsewhere")}, theirs: tree{"f": txt("b\n")},
		conflicts: map[string]string{"f": "symlink"}},
	{name: "mode change here, content change by the chain",
		base: tree{"run.sh": txt(ten), "key": txt("k\n")}, ours: tree{"run.sh": withPerm(ten, 0o755), "key": withPerm("k\n", 0o600)}, theirs: tree{"run.sh": txt(tenWith(map[string]string{"1": "#!/bin/sh\n"})), "key": txt("k2\n")},
		want: tree{"run.sh": withPerm(tenWith(map[string]string{"1": "#!/bin/sh\n"}), 0o755), "key": withPerm("k2\n", 0o600)}, changed: []string{"key", "run.sh"}},
	{name: "perm bits and a line merge together",
		base: tree{"f": withPerm(ten, 0o640)}, ours: tree{"f": withPerm(tenWith(map[string]string{"2": "two\n"}), 0o600)}, theirs: tree{"f": withPerm(tenWith(map[string]string{"9": "nine\n"}), 0o640)},
		want: tree{"f": withPerm(tenWith(map[string]string{"2": "two\n", "9": "nine\n"}), 0o600)}, changed: []string{"f"}},
	{name: "perm bits only, by the chain",
		base: tree{"f": txt("x\n")}, ours: tree{"f": txt("x\n")}, theirs: tree{"f": withPerm("x\n", 0o600)},
		want: tree{"f": withPerm("x\n", 0o600)}, changed: []string{"f"}},
	{name: "mode changed differently",
		base: tree{"f": txt("x\n")}, ours: tree{"f": withPerm("x\n", 0o600)}, theirs: tree{"f": withPerm("y\n", 0o755)},
		conflicts: map[string]string{"f": "mode changed differently (600 here, 755 by the chain)"}},
	{name: "binary changed on both sides",
		base: tree{"b": txt("\x00a\nb\nc\n")}, ours: tree{"b": txt("\x00A\nb\nc\n")}, theirs: tree{"b": txt("\x00a\nb\nC\n")},
		conflicts: map[string]string{"b": "binary file changed on both sides"}},
	{name: "binary changed on one side",
		base: tree{"b": txt("\x00a"), "t": txt("a\n")}, ours: tree{"b": txt("\x00a"), "t": txt("b\n")}, theirs: tree{"b": txt("\x00b"), "t": txt("a\n")},
		want: tree{"b": txt("\x00b"), "t": txt("b\n")}, changed: []string{"b"}},
	{name: "text made binary vs text edit",
		base: tree{"f": txt("a\nb\nc\n")}, ours: tree{"f": txt("a\nb\nC\n")}, theirs: tree{"f": txt("a\x00\nb\nc\n")},
		conflicts: map[string]string{"f": "binary file changed on both sides"}},
}

// TestTrees runs every case through Trees and checks the tree, Changed and
// the conflicts; every content of the tree must be in the store. Text
// merges are checked against git merge-file too, when git is there.
func TestTrees(t *testing.T) {
	ctx := context.Background()
	for _, tc := range mergeCases {
		t.Run(tc.name, func(t *testing.T) {
			st, err := checkpoint.OpenStore(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			ours := manifest(t, st, tc.ours)
			res, err := Trees(ctx, st, manifest(t, st, tc.base), ours, manifest(t, st, tc.theirs))
			if err != nil {
				t.Fatal(err)
			}
			var got map[string]string
			for _, c := range res.Conflicts {
				if got == nil {
					got = map[string]string{}
				}
				got[c.Path] = c.Reason
			}
			if len(got) != len(tc.conflicts) {
				t.Fatalf("conflicts %v, want %v", res.Conflicts, tc.conflicts)
			}
			for p, want := range tc.conflicts {
				if !strings.Contains(got[p], want) {
					t.Errorf("conflict on %s: %q, want it to say %q", p, got[p], want)
				}
			}
			if !slices.IsSortedFunc(res.Conflicts, func(a, b Conflict) int { return strings.Compare(a.Path, b.Path) }) {
				t.Errorf("conflicts not sorted: %v", res.Conflicts)
			}
			if len(tc.conflicts) > 0 {
				if res.Tree != nil {
					t.Fatal("a conflicted merge returned a tree")
				}
				return
			}
			if res.Tree == nil || !res.Tree.ExactPerms {
				t.Fatalf("clean merge: tree %v, want one keeping ours' ExactPerms", res.Tree)
			}
			assertTree(t, readTree(t, st, res.Tree), tc.want)
			wantChanged := tc.changed
			if wantChanged == nil {
				wantChanged = changedPaths(tc.ours, tc.want)
			}
			if !slices.Equal(res.Changed, wantChanged) {
				t.Errorf("Changed %q, want %q", res.Changed, wantChanged)
			}
			if !slices.Equal(res.Changed, changedPaths(readTree(t, st, ours), readTree(t, st, res.Tree))) {
				t.Errorf("Changed %q does not list exactly what differs from ours", res.Changed)
			}
		})
	}
}

func assertTree(t *testing.T, got, want tree) {
	t.Helper()
	for p, w := range want {
		if g, ok := got[p]; !ok || g != w {
			t.Errorf("%s: got %+v (present %v), want %+v", p, g, ok, w)
		}
	}
	for p := range got {
		if _, ok := want[p]; !ok {
			t.Errorf("%s: present, want it absent", p)
		}
	}
}

func changedPaths(a, b tree) []string {
	var out []string
	for p, f := range b {
		if g, ok := a[p]; !ok || g != f {
			out = append(out, p)
		}
	}
	for p := range a {
		if _, ok := b[p]; !ok {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return out
}

// TestTreesTextCasesMatchGit checks every text file merged on both sides
// in the cases against git merge-file: same verdict, same bytes.
func TestTreesTextCasesMatchGit(t *testing.T) {
	orc := newOracle(t)
	n := 0
	for _, tc := range mergeCases {
		for p, o := range tc.ours {
			b, bok := tc.base[p]
			th, tok := tc.theirs[p]
			if !bok || !tok || o.link || b.link || th.link || o.data == b.data || th.data == b.data || strings.Contains(b.data+o.data+th.data, "\x00") {
				continue
			}
			n++
			t.Run(tc.name+"/"+p, func(t *testing.T) {
				orc.check(t, []byte(b.data), []byte(o.data), []byte(th.data))
			})
		}
	}
	if n < 10 {
		t.Fatalf("only %d text merges in the cases", n)
	}
}

// TestTreesErrors: content missing from the store is an error naming the
// path, not a conflict; large files changed on both sides conflict
// without being read.
func TestTreesErrors(t *testing.T) {
	ctx := context.Background()
	st, err := checkpoint.OpenStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	base := manifest(t, st, tree{"f": txt(ten), "g": txt("g\n")})
	ours := manifest(t, st, tree{"f": txt(tenWith(map[string]string{"1": "one\n"})), "g": txt("g\n")})
	ghost := func(m *checkpoint.Manifest, p, content string) *checkpoint.Manifest {
		sum := sha256.Sum256([]byte(content))
		c := &checkpoint.Manifest{Files: map[string]checkpoint.Entry{}}
		for k, v := range m.Files {
			c.Files[k] = v
		}
		c.Files[p] = checkpoint.Entry{SHA256: hex.EncodeToString(sum[:]), Size: int64(len(content)), Mode: checkpoint.ModeFile}
		return c
	}
	for name, theirs := range map[string]*checkpoint.Manifest{
		"line merge": ghost(base, "f", "never stored, merged\n"),
		"taken":      ghost(base, "g", "never stored, taken\n"),
	} {
		res, err := Trees(ctx, st, base, ours, theirs)
		if err == nil || res != nil {
			t.Errorf("%s: got %+v, want an error", name, res)
			continue
		}
		if !errors.Is(err, checkpoint.ErrMissingBlob) && !strings.Contains(err.Error(), "not in the object store") {
			t.Errorf("%s: error %v does not say the content is missing", name, err)
		}
	}
	big := func(m *checkpoint.Manifest, c byte) *checkpoint.Manifest {
		out := &checkpoint.Manifest{Files: map[string]checkpoint.Entry{"huge": {SHA256: strings.Repeat(string(c), 64), Size: checkpoint.StreamThreshold + 1, Mode: checkpoint.ModeFile}}}
		return out
	}
	res, err := Trees(ctx, st, big(nil, 'a'), big(nil, 'b'), big(nil, 'c'))
	if err != nil || len(res.Conflicts) != 1 || !strings.Contains(res.Conflicts[0].Reason, "binary") {
		t.Fatalf("large files changed on both sides: %+v, %v; want a binary conflict, without reading them", res, err)
	}
	if _, err := Trees(ctx, st, base, nil, base); err == nil {
		t.Error("nil manifest accepted")
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := Trees(cctx, st, base, ours, base); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled context: %v", err)
	}
}
