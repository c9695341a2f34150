package message

import (
	"bytes"
	"errors"
	"math"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	bomB := "\xEF\xBB\xBF"
	tests := []struct {
		name    string
		in      string
		fields  []Field
		body    string
		hasFM   bool
		errLine int // >0: expect *ParseError at this line
		errHas  string
	}{
		{name: "empty file", in: "", body: ""},
		{name: "body only", in: "hello\nworld\n", body: "hello\nworld\n"},
		{name: "frontmatter and body", in: "---\nroutine: develop\n---\nDo it.\n",
			fields: []Field{{"routine", "develop"}}, body: "Do it.\n", hasFM: true},
		{name: "frontmatter only, no body", in: "---\na: 1\n---\n",
			fields: []Field{{"a", 1}}, hasFM: true},
		{name: "closing delimiter at EOF without newline", in: "---\na: 1\n---",
			fields: []Field{{"a", 1}}, hasFM: true},
		{name: "empty frontmatter block", in: "---\n---\nbody", body: "body", hasFM: true},
		{name: "comment-only frontmatter", in: "---\n# nothing\n---\nbody", body: "body", hasFM: true},
		{name: "null document", in: "---\n~\n---\nbody", body: "body", hasFM: true},
		{name: "dashes later in body are body", in: "---\na: x\n---\none\n---\nb: 2\n---\n",
			fields: []Field{{"a", "x"}}, body: "one\n---\nb: 2\n---\n", hasFM: true},
		{name: "body starting with dashes not at line 1", in: "\n---\na: 1\n---\n", body: "\n---\na: 1\n---\n"},
		{name: "four dashes are not a delimiter", in: "----\na: 1\n", body: "----\na: 1\n"},
		{name: "dashes with trailing text are not a delimiter", in: "--- x\n", body: "--- x\n"},
		{name: "CRLF delimiters", in: "---\r\na: 1\r\nb: two\r\n---\r\nbody\r\n",
			fields: []Field{{"a", 1}, {"b", "two"}}, body: "body\r\n", hasFM: true},
		{name: "BOM before frontmatter is dropped", in: bomB + "---\na: 1\n---\nx",
			fields: []Field{{"a", 1}}, body: "x", hasFM: true},
		{name: "BOM without frontmatter stays in body", in: bomB + "hello", body: bomB + "hello"},
		{name: "binary body kept", in: "---\na: 1\n---\n\x00\xff\xfe\n", fields: []Field{{"a", 1}}, body: "\x00\xff\xfe\n", hasFM: true},
		{name: "field order kept", in: "---\nz: 1\na: 2\nm: 3\n---\n",
			fields: []Field{{"z", 1}, {"a", 2}, {"m", 3}}, hasFM: true},
		{name: "value types", in: "---\ns: text\nq: \"42\"\ni: 42\nneg: -7\nf: 1.5\nfi: 1.0\nb: true\nn: null\ne:\nbig: 18446744073709551615\nl: [1, a]\nm: {k: v}\n---\n",
			fields: []Field{{"s", "text"}, {"q", "42"}, {"i", 42}, {"neg", -7}, {"f", 1.5}, {"fi", 1.0}, {"b", true}, {"n", nil}, {"e", nil},
				{"big", uint64(math.MaxUint64)}, {"l", []any{1, "a"}}, {"m", map[string]any{"k": "v"}}}, hasFM: true},
		{name: "timestamp stays text", in: "---\nd: 2025-01-01\n---\n", fields: []Field{{"d", "2025-01-01"}}, hasFM: true},
		{name: "yes stays text (YAML 1.2)", in: "---\nx: yes\n---\n", fields: []Field{{"x", "yes"}}, hasFM: true},
		{name: "numeric key read as text", in: "---\n1: one\n---\n", fields: []Field{{"1", "one"}}, hasFM: true},
		{name: "nested non-string keys read as text", in: "---\nm: {1: a, true: b}\n---\n",
			fields: []Field{{"m", map[string]any{"1": "a", "true": "b"}}}, hasFM: true},
		{name: "aliases and nested merge", in: "---\nbase: &b {x: 1}\nuse: *b\nmerged:\n  <<: *b\n  y: 2\n---\n",
			fields: []Field{{"base", map[string]any{"x": 1}}, {"use", map[string]any{"x": 1}}, {"merged", map[string]any{"x": 1, "y": 2}}}, hasFM: true},
		{name: "literal block", in: "---\nt: |\n  a\n  b\n---\n", fields: []Field{{"t", "a\nb\n"}}, hasFM: true},

		{name: "unclosed block", in: "---\na: 1\nbody without end\n", errLine: 1, errHas: "never closed"},
		{name: "lone opening delimiter", in: "---", errLine: 1, errHas: "never closed"},
		{name: "invalid YAML line", in: "---\na: 1\n  b: 2\n---\n", errLine: 3, errHas: "invalid YAML"},
		{name: "invalid YAML first line", in: "---\na: b: c\n---\n", errLine: 2, errHas: "invalid YAML"},
		{name: "unterminated flow", in: "---\nok: 1\nl: [1, 2\n---\n", errLine: 3, errHas: "invalid YAML"},
		{name: "tab indentation", in: "---\na: 1\n\tb: 2\n---\n", errLine: 3, errHas: "invalid YAML"},
		{name: "not a mapping (scalar)", in: "---\nfoo\n---\n", errLine: 2, errHas: "must be a mapping"},
		{name: "not a mapping (list)", in: "---\n- a\n- b\n---\n", errLine: 2, errHas: "found a list"},
		{name: "duplicate key", in: "---\na: 1\nb: 2\na: 3\n---\n", errLine: 4, errHas: "repeats the one on line 2"},
		{name: "duplicate nested key", in: "---\na:\n  x: 1\n  x: 2\n---\n", errLine: 4, errHas: "already defined"},
		{name: "complex key", in: "---\n? [a, b]\n: 1\n---\n", errLine: 2, errHas: "plain text"},
		{name: "error after a multi-line flow value", in: "---\nl: [1,\n  2]\nx: y: z\n---\n", errLine: 4, errHas: "invalid YAML"},
		{name: "unclosed quote", in: "---\na: 1\nb: \"abc\n---\n", errLine: 3, errHas: "invalid YAML"},
		{name: "error in second document", in: "---\na: 1\n--- [\n---\n", errLine: 3, errHas: "invalid YAML"},
		{name: "second document", in: "---\na: 1\n--- b\n---\n", errLine: 3, errHas: "second YAML document"},
		{name: "self-referencing anchor", in: "---\na: &x\n  b: *x\n---\n", errLine: 2, errHas: "contains itself"},
		{name: "nested key collision after text conversion", in: "---\nm: {1: a, \"1\": b}\n---\n", errLine: 2, errHas: "already defined at line 2"},
		{name: "CRLF error line", in: "---\r\na: 1\r\nb: [\r\n---\r\n", errLine: 3, errHas: "invalid YAML"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m, err := Parse([]byte(tc.in))
			if tc.errLine > 0 {
				var pe *ParseError
				if !errors.As(err, &pe) {
					t.Fatalf("want ParseError at line %d, got %v (msg %#v)", tc.errLine, err, m)
				}
				if pe.Line != tc.errLine || !strings.Contains(pe.Error(), tc.errHas) {
					t.Fatalf("got %q (line %d), want line %d containing %q", pe.Error(), pe.Line, tc.errLine, tc.errHas)
				}
				if !strings.HasPrefix(pe.Error(), "frontmatter line ") {
					t.Fatalf("error %q lacks the frontmatter line prefix", pe.Error())
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			want := &Message{Fields: tc.fields, Body: []byte(tc.body), HasFrontmatter: tc.hasFM}
			if !m.Equal(want) {
				t.Fatalf("got %#v body %q fm %v\nwant %#v body %q fm %v", m.Fields, m.Body, m.HasFrontmatter, want.Fields, want.Body, want.HasFrontmatter)
			}
			assertRoundTrip(t, m)
		})
	}
}

func assertRoundTrip(t *testing.T, m *Message) {
	t.Helper()
	out := m.Render()
	back, err := Parse(out)
	if err != nil {
		t.Fatalf("rendered message does not parse: %v\n%s\nfields: %#v", err, out, m.Fields)
	}
	if !back.Equal(m) {
		t.Fatalf("round trip changed the message\nbefore: %#v %q %v\nafter:  %#v %q %v\nrendered:\n%s", m.Fields, m.Body, m.HasFrontmatter, back.Fields, back.Body, back.HasFrontmatter, out)
	}
}

func TestRender(t *testing.T) {
	tests := []struct {
		name string
		msg  *Message
		want string
	}{
		{"no frontmatter", &Message{Body: []byte("just a body\n")}, "just a body\n"},
		{"empty message", &Message{}, ""},
		{"empty block kept", &Message{HasFrontmatter: true, Body: []byte("b")}, "---\n---\nb"},
		{"fields force a block", &Message{Fields: []Field{{"a", "b"}}}, "---\na: b\n---\n"},
		{"body that looks like frontmatter is protected", &Message{Body: []byte("---\nx: 1\n---\n")}, "---\n---\n---\nx: 1\n---\n"},
		{"spec example", &Message{HasFrontmatter: true, Fields: []Field{
			{"id", "2025022514320000-0"}, {"chain", 2025022514320000}, {"seq", 0}, {"type", "task"},
			{"routine", "pr-review"}, {"target_branch", "main"}}, Body: []byte("Review the current branch\n")},
			"---\nid: 2025022514320000-0\nchain: 2025022514320000\nseq: 0\ntype: task\nroutine: pr-review\ntarget_branch: main\n---\nReview the current branch\n"},
		{"strings that look like other types are quoted", &Message{Fields: []Field{{"a", "true"}, {"b", "12"}, {"c", "null"}, {"d", "---"}, {"e", ""}}},
			"---\na: \"true\"\nb: \"12\"\nc: \"null\"\nd: '---'\ne: \"\"\n---\n"},
		{"floats stay floats", &Message{Fields: []Field{{"a", 1.0}, {"b", math.Inf(-1)}, {"c", 1e21}}}, "---\na: 1.0\nb: -.inf\nc: 1e+21\n---\n"},
		{"map keys sorted, lists in block style", &Message{Fields: []Field{{"m", map[string]any{"b": 1, "a": []any{"x"}}}}}, "---\nm:\n  a:\n    - x\n  b: 1\n---\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := string(tc.msg.Render())
			if got != tc.want {
				t.Fatalf("got\n%q\nwant\n%q", got, tc.want)
			}
			back, err := Parse([]byte(got))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(back.Body, tc.msg.Body) {
				t.Fatalf("body changed: %q -> %q", tc.msg.Body, back.Body)
			}
		})
	}
}

func TestAccessors(t *testing.T) {
	m, err := Parse([]byte("---\nid: 2025022514320000-3\nchain: 2025022514320000\nseq: 3\ntype: spec\nroutine: develop\ninput_file: a.spec.md\nlist: [a, 1]\nmap: {k: \"<v>\"}\nf: 2.5\nn: null\n---\n"))
	if err != nil {
		t.Fatal(err)
	}
	checks := map[string]string{
		"Chain": m.Chain(), "ID": m.ID(), "Type": m.Type(), "Routine": m.Routine(), "InputFile": m.InputFile(),
		"list": m.GetString("list"), "map": m.GetString("map"), "f": m.GetString("f"), "n": m.GetString("n"), "absent": m.GetString("absent"),
	}
	want := map[string]string{
		"Chain": "2025022514320000", "ID": "2025022514320000-3", "Type": "spec", "Routine": "develop", "InputFile": "a.spec.md",
		"list": `["a",1]`, "map": `{"k":"<v>"}`, "f": "2.5", "n": "", "absent": "",
	}
	for k, w := range want {
		if checks[k] != w {
			t.Errorf("%s = %q, want %q", k, checks[k], w)
		}
	}
	if s, ok := m.Seq(); !ok || s != 3 {
		t.Errorf("Seq = %d, %v", s, ok)
	}
	m.Set("seq", "x")
	if _, ok := m.Seq(); ok {
		t.Error("Seq accepted a non-number")
	}
	m.Set("seq", "12")
	if s, ok := m.Seq(); !ok || s != 12 {
		t.Errorf("Seq from string = %d, %v", s, ok)
	}
}

func TestSetDelete(t *testing.T) {
	m := &Message{}
	m.Set("a", int64(5))
	m.Set("b", []string{"x", "y"})
	m.Set("c", float32(0.5))
	m.Set("a", uint8(7)) // replaces in place
	want := []Field{{"a", 7}, {"b", []any{"x", "y"}}, {"c", 0.5}}
	if !(&Message{Fields: want}).Equal(&Message{Fields: m.Fields}) {
		t.Fatalf("got %#v", m.Fields)
	}
	m.Delete("b")
	m.Delete("nope")
	if len(m.Fields) != 2 || m.Fields[0].Key != "a" || m.Fields[1].Key != "c" {
		t.Fatalf("after delete: %#v", m.Fields)
	}
	assertRoundTrip(t, &Message{Fields: m.Fields, HasFrontmatter: true})
}

func TestParamValue(t *testing.T) {
	tests := []struct {
		in   any
		want string
	}{
		{nil, ""}, {"x y", "x y"}, {true, "true"}, {42, "42"}, {int64(-3), "-3"}, {uint64(math.MaxUint64), "18446744073709551615"},
		{2.5, "2.5"}, {1.0, "1.0"}, {math.NaN(), ".nan"},
		{[]any{"a", 1, true, nil}, `["a",1,true,null]`},
		{map[string]any{"b": 1, "a": "<&>"}, `{"a":"<&>","b":1}`},
		{[]any{math.Inf(1)}, `[".inf"]`},
	}
	for _, tc := range tests {
		if got := ParamValue(tc.in); got != tc.want {
			t.Errorf("ParamValue(%#v) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestCloneIsDeep(t *testing.T) {
	m := &Message{Fields: []Field{{"l", []any{map[string]any{"k": "v"}}}}, Body: []byte("b")}
	c := m.Clone()
	c.Fields[0].Value.([]any)[0].(map[string]any)["k"] = "changed"
	c.Body[0] = 'x'
	if m.Fields[0].Value.([]any)[0].(map[string]any)["k"] != "v" || string(m.Body) != "b" {
		t.Fatal("Clone shares memory with the original")
	}
}

func TestEqual(t *testing.T) {
	a := &Message{Fields: []Field{{"a", 1}}}
	tests := []struct {
		b    *Message
		want bool
	}{
		{&Message{Fields: []Field{{"a", 1}}}, true},
		{&Message{Fields: []Field{{"a", 1.0}}}, false},
		{&Message{Fields: []Field{{"a", "1"}}}, false},
		{&Message{Fields: []Field{{"b", 1}}}, false},
		{&Message{Fields: []Field{{"a", 1}}, HasFrontmatter: true}, false},
		{&Message{Fields: []Field{{"a", 1}}, Body: []byte("x")}, false},
		{&Message{Fields: []Field{{"a", 1}}, Body: []byte{}}, true},
	}
	for i, tc := range tests {
		if got := a.Equal(tc.b); got != tc.want {
			t.Errorf("case %d: Equal = %v", i, got)
		}
	}
	n1 := &Message{Fields: []Field{{"x", []any{math.NaN()}}}}
	n2 := &Message{Fields: []Field{{"x", []any{math.NaN()}}}}
	if !n1.Equal(n2) {
		t.Error("NaN should equal NaN")
	}
}
