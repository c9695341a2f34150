package tree

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/decreehq/decree/internal/testtool"
	"github.com/decreehq/decree/pkg/config"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// TestRender compares the text and Mermaid renderings of real exports with
// golden files (go test -update rewrites them).
func TestRender(t *testing.T) {
	dir := testtool.SharedFixtures(t, "monads")
	for _, file := range []string{"AnimalTest.csv", "sample_data.json", "ExplainYourself.csv"} {
		tr, err := Load(filepath.Join(dir, file), config.Default().Tree)
		if err != nil {
			t.Fatal(err)
		}
		for ext, write := range map[string]func(*bytes.Buffer) error{
			".txt": func(b *bytes.Buffer) error { return tr.WriteText(b) },
			".mmd": func(b *bytes.Buffer) error { return tr.WriteMermaid(b) },
		} {
			var b bytes.Buffer
			if err := write(&b); err != nil {
				t.Fatal(err)
			}
			golden := filepath.Join("testdata", file+ext)
			if *update {
				if err := os.WriteFile(golden, b.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(b.Bytes(), want) {
				t.Errorf("%s: got\n%s\nwant\n%s", golden, b.Bytes(), want)
			}
		}
	}
}
