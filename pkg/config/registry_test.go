package config

import (
	"bytes"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/decreehq/decree/pkg/fsutil"
)

var update = flag.Bool("update", false, "rewrite golden files")

func on() *bool  { return ptr(true) }
func off() *bool { return ptr(false) }

func TestWriteRegistryGolden(t *testing.T) {
	tests := []struct {
		name     string
		routines map[string]RoutineSettings
		shared   map[string]RoutineSettings
	}{
		{"comments",
			map[string]RoutineSettings{
				"develop":    {Enabled: off(), MaxRetries: 5},
				"gmail-sync": {Enabled: on(), TimeoutS: 90},
				"review":     {Enabled: on()},
				"build":      {Enabled: on(), Requires: map[string]string{"os": "linux", "gpu": "true"}},
			},
			map[string]RoutineSettings{"deploy": {Enabled: on()}, "notify": {Enabled: off()}}},
		{"append",
			map[string]RoutineSettings{"develop": {Enabled: on()}, "rust-develop": {Enabled: on()}},
			map[string]RoutineSettings{"deploy": {Enabled: off()}}},
		{"crlf",
			map[string]RoutineSettings{"develop": {Enabled: on(), Deprecated: true}},
			map[string]RoutineSettings{"x": {}}},
		{"flow",
			map[string]RoutineSettings{"develop": {Enabled: off()}},
			map[string]RoutineSettings{"s": {Enabled: on()}}},
		{"empty-maps", nil, nil},
		{"no-newline",
			map[string]RoutineSettings{"develop": {Enabled: on()}},
			map[string]RoutineSettings{"deploy": {Enabled: on()}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in, err := os.ReadFile(filepath.Join("testdata", "registry", tc.name+".in.yml"))
			if err != nil {
				t.Fatal(err)
			}
			p := filepath.Join(t.TempDir(), "config.yml")
			if err := os.WriteFile(p, in, 0o600); err != nil {
				t.Fatal(err)
			}
			if err := WriteRegistry(p, tc.routines, tc.shared); err != nil {
				t.Fatal(err)
			}
			got, _ := os.ReadFile(p)
			golden := filepath.Join("testdata", "registry", tc.name+".golden.yml")
			if *update {
				if err := os.WriteFile(golden, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("got:\n%s\nwant:\n%s", got, want)
			}
			if st, _ := os.Stat(p); st.Mode().Perm() != 0o600 {
				t.Errorf("file mode changed to %v", st.Mode().Perm())
			}
			// The registries read back as written.
			c, _, err := Parse(p, got)
			if err != nil {
				t.Fatal(err)
			}
			if !sameRegistry(c.Routines, orEmpty(tc.routines)) || !sameRegistry(c.SharedRoutines, orEmpty(tc.shared)) {
				t.Fatalf("read back %v / %v", c.Routines, c.SharedRoutines)
			}
			// Every line outside the registry blocks is unchanged, in order.
			if tc.name != "flow" {
				if a, b := outsideRegistry(in), outsideRegistry(got); a != b {
					t.Fatalf("content outside the registry changed:\n%q\n%q", a, b)
				}
			}
			// Writing the same registry again changes nothing.
			if err := WriteRegistry(p, tc.routines, tc.shared); err != nil {
				t.Fatal(err)
			}
			again, _ := os.ReadFile(p)
			if !bytes.Equal(again, got) {
				t.Fatalf("second write changed the file:\n%s", again)
			}
		})
	}
}

func orEmpty(m map[string]RoutineSettings) map[string]RoutineSettings {
	if m == nil {
		return map[string]RoutineSettings{}
	}
	return m
}

// outsideRegistry drops the routines:/shared_routines: blocks (the key line
// and the deeper-indented lines after it) and returns the other lines.
func outsideRegistry(data []byte) string {
	var out []string
	in := false
	for _, l := range strings.SplitAfter(string(data), "\n") {
		t := strings.TrimRight(l, "\r\n")
		switch {
		case strings.HasPrefix(t, "routines:") || strings.HasPrefix(t, "shared_routines:"):
			in = true
			continue
		case in && (t == "" || strings.HasPrefix(t, " ")):
			continue
		}
		in = false
		out = append(out, strings.TrimRight(l, "\r\n"))
	}
	// Trailing newline differences at EOF are not content.
	return strings.TrimRight(strings.Join(out, "\n"), "\n")
}

func TestWriteRegistryCreatesFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "config.yml")
	err := WriteRegistry(p, map[string]RoutineSettings{"develop": {Enabled: on()}}, map[string]RoutineSettings{"deploy": {Enabled: off()}})
	if err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(p)
	want := "routines:\n  develop:\n    enabled: true\nshared_routines:\n  deploy:\n    enabled: false\n"
	if string(got) != want {
		t.Fatalf("got %q", got)
	}
	// Nothing to write into a missing file gives an empty file.
	p2 := filepath.Join(t.TempDir(), "config.yml")
	if err := WriteRegistry(p2, nil, nil); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(p2); len(got) != 0 {
		t.Fatalf("got %q", got)
	}
}

func TestWriteRegistryRejects(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "config.yml")
	if err := WriteRegistry(p, map[string]RoutineSettings{"../evil": {}}, nil); !errors.Is(err, fsutil.ErrUnsafePath) {
		t.Fatalf("unsafe name: %v", err)
	}
	if _, err := os.Stat(p); !os.IsNotExist(err) {
		t.Fatal("file created despite the error")
	}
	broken := []byte("max_retries: [\n")
	if err := os.WriteFile(p, broken, 0o644); err != nil {
		t.Fatal(err)
	}
	err := WriteRegistry(p, map[string]RoutineSettings{"a": {}}, nil)
	if err == nil || !strings.Contains(err.Error(), "not valid YAML") {
		t.Fatalf("broken file: %v", err)
	}
	if got, _ := os.ReadFile(p); !bytes.Equal(got, broken) {
		t.Fatal("broken file was changed")
	}
	if err := os.WriteFile(p, []byte("- a list\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := WriteRegistry(p, nil, nil); err == nil || !strings.Contains(err.Error(), "not a mapping") {
		t.Fatalf("list file: %v", err)
	}
}

func TestMergeEntryKeepsAliasSpelling(t *testing.T) {
	p := filepath.Join(t.TempDir(), "config.yml")
	in := "routines:\n  a:\n    max_attempts: 2 # per-routine\n  b:\n    max_retries: 2\n    max_attempts: 2\n"
	if err := os.WriteFile(p, []byte(in), 0o644); err != nil {
		t.Fatal(err)
	}
	err := WriteRegistry(p, map[string]RoutineSettings{"a": {MaxRetries: 7}, "b": {MaxRetries: 3}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(p)
	want := "routines:\n  a:\n    max_attempts: 7 # per-routine\n  b:\n    max_retries: 3\n"
	if string(got) != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
	c, _, err := Load(p)
	if err != nil || !reflect.DeepEqual(c.AttemptsFor("a"), 7) {
		t.Fatalf("load: %v", err)
	}
}

func TestWriteRegistryOddFiles(t *testing.T) {
	reg := map[string]RoutineSettings{"develop": {Enabled: on()}}
	tests := []struct{ name, in, want string }{
		{"indented document", " max_depth: 2\n", " max_depth: 2\n routines:\n   develop:\n     enabled: true\n"},
		{"null document", "# keep me\n~\n", "# keep me\nroutines:\n  develop:\n    enabled: true\n"},
		{"value after a margin comment", "routines:\n#\n 000\nx: 1\n", "routines:\n  #\n  develop:\n    enabled: true\nx: 1\n"},
		{"document start marker", "---\nmax_depth: 2\nroutines:\n  old: {}\n", "---\nmax_depth: 2\nroutines:\n  develop:\n    enabled: true\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "config.yml")
			if err := os.WriteFile(p, []byte(tc.in), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := WriteRegistry(p, reg, nil); err != nil {
				t.Fatal(err)
			}
			if got, _ := os.ReadFile(p); string(got) != tc.want {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
		})
	}
}

// TestWriteRegistryCostSettings: rewriting the registry keeps a routine's
// budget and attempts list, and reads back as written.
func TestWriteRegistryCostSettings(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config.yml")
	in := "routines:\n  develop:\n    max_cost_usd: 2.5\n    attempts: [haiku, sonnet, opus]\n"
	if err := os.WriteFile(path, []byte(in), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, _, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	s := cfg.Routines["develop"]
	s.Enabled = on()
	want := map[string]RoutineSettings{"develop": s, "new": {Enabled: on(), MaxCostUSD: 1, Attempts: []string{"a"}}}
	if err := WriteRegistry(path, want, nil); err != nil {
		t.Fatal(err)
	}
	back, _, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back.Routines, want) {
		out, _ := os.ReadFile(path)
		t.Errorf("read back %+v, want %+v\n%s", back.Routines, want, out)
	}
}
