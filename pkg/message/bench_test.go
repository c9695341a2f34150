package message

import (
	"bytes"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

var benchMsg = []byte("---\nid: 2025022514320000-0\nchain: 2025022514320000\nseq: 0\ntype: task\nroutine: pr-review\ntarget_branch: main\nreviewer: alice\nlabels: [a, b, c]\n---\n" + strings.Repeat("Review the current branch and fix what is broken.\n", 200))

// BenchmarkParse measures Parse; BenchmarkYAMLReference decodes the same
// frontmatter with plain yaml.Unmarshal into a map, the floor Parse builds
// on. Compare the two ns/op figures from one run.
func BenchmarkParse(b *testing.B) {
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if _, err := Parse(benchMsg); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkYAMLReference(b *testing.B) {
	end := bytes.Index(benchMsg[4:], []byte("\n---\n")) + 5
	fm := benchMsg[4:end]
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		var m map[string]any
		if err := yaml.Unmarshal(fm, &m); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkRender(b *testing.B) {
	m, err := Parse(benchMsg)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		_ = m.Render()
	}
}

func BenchmarkChainGenNext(b *testing.B) {
	g := NewChainGen(nil)
	for i := 0; i < b.N; i++ {
		_ = g.Next()
	}
}
