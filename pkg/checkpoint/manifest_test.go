package checkpoint

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite golden files under testdata/")

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s differs from output:\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}

func goldenTree(t *testing.T) (*Checkpointer, string, *Manifest) {
	cp := newCP(t)
	root := t.TempDir()
	writeSpec(t, root, map[string]spec{
		"src/main.go": file("package main\n\nfunc main() {\n\tprintln(\"hi\")\n}\n"),
		"run.sh":      exe("#!/bin/sh\necho run\n"),
		"latest":      link("src/main.go"),
		"empty":       file(""),
		"logo.bin":    file("\x89PNG\x00\x01\x02"),
		"notes.txt":   file("one\ntwo\nthree\nfour\nfive\nsix\nseven\neight\n"),
	})
	return cp, root, snapshot(t, cp, root)
}

// TestManifestGolden pins the manifest.json format.
func TestManifestGolden(t *testing.T) {
	_, _, m := goldenTree(t)
	data, err := MarshalManifest(m)
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "manifest.golden.json", data)
	back, err := UnmarshalManifest(data)
	if err != nil {
		t.Fatal(err)
	}
	if !back.Equal(m) {
		t.Fatal("manifest does not survive a JSON round trip")
	}
	path := filepath.Join(t.TempDir(), "manifest.json")
	if err := WriteManifest(path, m); err != nil {
		t.Fatal(err)
	}
	read, err := ReadManifest(path)
	if err != nil || !read.Equal(m) {
		t.Fatalf("ReadManifest: %v", err)
	}
}

// TestDiffGolden pins the diff format on a change of every kind.
func TestDiffGolden(t *testing.T) {
	cp, root, before := goldenTree(t)
	writeSpec(t, root, map[string]spec{
		"src/main.go":   file("package main\n\nfunc main() {\n\tprintln(\"hello\")\n}\n"),
		"run.sh":        file("#!/bin/sh\necho run\n"),
		"latest":        link("run.sh"),
		"logo.bin":      file("\x89PNG\x00\x01\x03"),
		"notes.txt":     file("one\ntwo\nTHREE\nfour\nfive\nsix\nseven\neight"),
		"new file é.md": file("# new\n"),
	})
	os.Remove(filepath.Join(root, "empty"))
	diff, _, err := cp.Diff(context.Background(), root, before)
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "changes.golden.diff", diff)
}

func TestManifestRejectsBadInput(t *testing.T) {
	const h = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
	tests := []struct{ name, json, want string }{
		{"not json", `{"files": `, "decode manifest JSON"},
		{"no files", `{}`, `no "files"`},
		{"bad hash", `{"files": {"a": {"sha256": "xyz", "size": 0, "mode": "644"}}}`, "not 64 lowercase hex"},
		{"bad mode", `{"files": {"a": {"sha256": "` + h + `", "size": 0, "mode": "777"}}}`, "unknown mode"},
		{"escaping path", `{"files": {"../a": {"sha256": "` + h + `", "size": 0, "mode": "644"}}}`, "climbs out"},
		{"absolute path", `{"files": {"/etc/a": {"sha256": "` + h + `", "size": 0, "mode": "644"}}}`, "absolute"},
		{"link without mode", `{"files": {"a": {"sha256": "` + h + `", "size": 0, "mode": "644", "link": "x"}}}`, "link"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := UnmarshalManifest([]byte(tt.json))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want one containing %q", err, tt.want)
			}
		})
	}
}

// TestMarshalManifestMatchesEncodingJSON: the hand-written encoder writes
// exactly what encoding/json would, including escaped names and links.
func TestMarshalManifestMatchesEncodingJSON(t *testing.T) {
	m := &Manifest{Files: map[string]Entry{
		"a \"quoted\" \\ name\t<&>": {SHA256: strings.Repeat("a", 64), Size: 3, Mode: ModeExec},
		"ü/link":                    {SHA256: strings.Repeat("b", 64), Size: 4, Mode: ModeSymlink, Link: "../\"x\""},
		"z":                         {SHA256: strings.Repeat("c", 64), Size: 0, Mode: ModeFile},
		"plain/name_1.go~ (2)":      {SHA256: strings.Repeat("d", 64), Size: 1 << 40, Mode: ModeFile},
		"del\x7f nl\n \u2028 \xff":  {SHA256: strings.Repeat("e", 64), Size: 5, Mode: ModeSymlink, Link: "plain/target"},
	}}
	got, err := MarshalManifest(m)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := json.MarshalIndent(m, "", "  ")
	want = append(want, '\n')
	if !bytes.Equal(got, want) {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
	empty, _ := MarshalManifest(&Manifest{})
	if back, err := UnmarshalManifest(empty); err != nil || len(back.Files) != 0 {
		t.Fatalf("empty manifest: %q %v", empty, err)
	}
}
