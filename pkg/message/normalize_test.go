package message

import (
	"strings"
	"testing"
)

func TestNormalize(t *testing.T) {
	const c = "2025022514320000"
	tests := []struct {
		name   string
		in     string
		input  NormalizeInput
		want   string // rendered frontmatter+body after normalising
		errHas string
	}{
		{
			name:  "follow-up with no frontmatter takes chain and seq from the file name",
			in:    "Fix type errors.\n",
			input: NormalizeInput{FileName: c + "-1.md"},
			want:  "---\nid: 2025022514320000-1\nchain: 2025022514320000\nseq: 1\ntype: task\n---\nFix type errors.\n",
		},
		{
			name:  "partial frontmatter keeps routine",
			in:    "---\nroutine: develop\n---\nFix.\n",
			input: NormalizeInput{FileName: c + "-2.md"},
			want:  "---\nid: 2025022514320000-2\nchain: 2025022514320000\nseq: 2\ntype: task\nroutine: develop\n---\nFix.\n",
		},
		{
			name:  "named message uses the given chain and seq",
			in:    "---\ntarget_branch: main\nroutine: pr-review\nreviewer: alice\n---\nReview\n",
			input: NormalizeInput{FileName: "pr-review.md", Chain: c, Seq: 0},
			want:  "---\nid: 2025022514320000-0\nchain: 2025022514320000\nseq: 0\ntype: task\nroutine: pr-review\ntarget_branch: main\nreviewer: alice\n---\nReview\n",
		},
		{
			name:  "input_file ending in .spec.md makes a spec",
			in:    "---\ninput_file: .decree/migrations/01-auth.spec.md\n---\n",
			input: NormalizeInput{FileName: "add-auth.md", Chain: c},
			want:  "---\nid: 2025022514320000-0\nchain: 2025022514320000\nseq: 0\ntype: spec\ninput_file: .decree/migrations/01-auth.spec.md\n---\n",
		},
		{
			name:  "other input files make a task",
			in:    "---\ninput_file: notes.md\n---\n",
			input: NormalizeInput{FileName: "x.md", Chain: c},
			want:  "---\nid: 2025022514320000-0\nchain: 2025022514320000\nseq: 0\ntype: task\ninput_file: notes.md\n---\n",
		},
		{
			name:  "explicit valid type kept",
			in:    "---\ntype: task\ninput_file: a.spec.md\n---\n",
			input: NormalizeInput{FileName: "x.md", Chain: c},
			want:  "---\nid: 2025022514320000-0\nchain: 2025022514320000\nseq: 0\ntype: task\ninput_file: a.spec.md\n---\n",
		},
		{
			name:  "explicit frontmatter chain and seq win over the input",
			in:    "---\nseq: 4\nchain: \"2024010100000007\"\n---\n",
			input: NormalizeInput{FileName: "x.md", Chain: c, Seq: 9},
			want:  "---\nid: 2024010100000007-4\nchain: 2024010100000007\nseq: 4\ntype: task\n---\n",
		},
		{
			name:  "consistent frontmatter and file name",
			in:    "---\nid: 2025022514320000-3\nchain: 2025022514320000\nseq: 3\n---\nx",
			input: NormalizeInput{FileName: c + "-3.md"},
			want:  "---\nid: 2025022514320000-3\nchain: 2025022514320000\nseq: 3\ntype: task\n---\nx",
		},
		{name: "chain clash", in: "---\nchain: 2024010100000000\n---\n", input: NormalizeInput{FileName: c + "-1.md"}, errHas: "disagrees with the file name's chain"},
		{name: "seq clash", in: "---\nseq: 2\n---\n", input: NormalizeInput{FileName: c + "-1.md"}, errHas: "frontmatter seq 2 disagrees"},
		{name: "id clash", in: "---\nid: other\n---\n", input: NormalizeInput{FileName: c + "-1.md"}, errHas: "frontmatter id \"other\" disagrees"},
		{name: "bad type", in: "---\ntype: bug\n---\n", input: NormalizeInput{FileName: c + "-1.md"}, errHas: "type: got \"bug\", allowed: spec, task"},
		{name: "bad chain in frontmatter", in: "---\nchain: 12\n---\n", input: NormalizeInput{FileName: "a.md", Chain: c}, errHas: "not a chain id"},
		{name: "negative seq", in: "---\nseq: -1\n---\n", input: NormalizeInput{FileName: "a.md", Chain: c}, errHas: "not a non-negative whole number"},
		{name: "no chain anywhere", in: "x", input: NormalizeInput{FileName: "a.md"}, errHas: "no chain id"},
		{name: "invalid date in chain", in: "---\nchain: 2025133014320000\n---\n", input: NormalizeInput{FileName: "a.md", Chain: c}, errHas: "not a chain id"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m, err := Parse([]byte(tc.in))
			if err != nil {
				t.Fatal(err)
			}
			err = Normalize(m, tc.input)
			if tc.errHas != "" {
				if err == nil || !strings.Contains(err.Error(), tc.errHas) {
					t.Fatalf("want error containing %q, got %v", tc.errHas, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := string(m.Render()); got != tc.want {
				t.Fatalf("got\n%s\nwant\n%s", got, tc.want)
			}
			// Normalising twice changes nothing.
			again := m.Clone()
			if err := Normalize(again, tc.input); err != nil || !again.Equal(m) {
				t.Fatalf("second Normalize changed the message or failed: %v", err)
			}
			assertRoundTrip(t, m)
		})
	}
}

func TestChainFromFileName(t *testing.T) {
	tests := []struct {
		in    string
		chain string
		seq   int
		ok    bool
	}{
		{"2025022514320000-0.md", "2025022514320000", 0, true},
		{"inbox/2025022514320000-12.md", "2025022514320000", 12, true},
		{"2025022514320000-1.txt", "", 0, false},
		{"202502251432000-1.md", "", 0, false},
		{"fix-types.md", "", 0, false},
		{"2025022514320000-.md", "", 0, false},
		{"2025022599320000-1.md", "", 0, false},
	}
	for _, tc := range tests {
		c, s, ok := ChainFromFileName(tc.in)
		if c != tc.chain || s != tc.seq || ok != tc.ok {
			t.Errorf("ChainFromFileName(%q) = %q, %d, %v", tc.in, c, s, ok)
		}
	}
}

func TestSplitID(t *testing.T) {
	tests := []struct {
		in    string
		chain string
		seq   int
		ok    bool
	}{
		{"2025022514320000-0", "2025022514320000", 0, true},
		{"2025022514320000-12", "2025022514320000", 12, true},
		{"2025022514320000-0.md", "", 0, false},
		{"2025022514320000", "", 0, false},
		{"2025022599320000-1", "", 0, false},
		{"x-2025022514320000-1", "", 0, false},
	}
	for _, tc := range tests {
		c, s, ok := SplitID(tc.in)
		if c != tc.chain || s != tc.seq || ok != tc.ok {
			t.Errorf("SplitID(%q) = %q, %d, %v", tc.in, c, s, ok)
		}
	}
}
