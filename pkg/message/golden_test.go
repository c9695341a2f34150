package message

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite golden files")

// TestGoldenMessages parses every file under testdata/messages, renders it,
// and compares the result with testdata/rendered/<name>.
func TestGoldenMessages(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "messages", "*.md"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no test messages: %v", err)
	}
	for _, p := range files {
		name := filepath.Base(p)
		t.Run(strings.TrimSuffix(name, ".md"), func(t *testing.T) {
			data, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			m, err := Parse(data)
			if err != nil {
				t.Fatal(err)
			}
			got := m.Render()
			golden := filepath.Join("testdata", "rendered", name)
			if *update {
				if err := os.MkdirAll(filepath.Dir(golden), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(golden, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("rendered:\n%s\nwant:\n%s", got, want)
			}
			assertRoundTrip(t, m)
		})
	}
}
