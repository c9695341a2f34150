package wiremanifest

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strings"
	"testing"

	"github.com/decreehq/decree/pkg/checkpoint"
	"github.com/decreehq/decree/pkg/fsutil"
	decreev1 "github.com/decreehq/decree/proto/decree/v1"
)

func sumOf(s string) string {
	b := sha256.Sum256([]byte(s))
	return hex.EncodeToString(b[:])
}

// TestDigestIsSHA256OfManifestJSON compares the streamed digest with the
// hash of checkpoint.MarshalManifest, the oracle, on awkward names.
func TestDigestIsSHA256OfManifestJSON(t *testing.T) {
	manifests := map[string]*checkpoint.Manifest{
		"empty": {Files: map[string]checkpoint.Entry{}},
		"nil":   {},
		"plain": {Files: map[string]checkpoint.Entry{
			"a.txt":      {SHA256: sumOf("a"), Size: 1, Mode: checkpoint.ModeFile},
			"bin/run.sh": {SHA256: sumOf("run"), Size: 3, Mode: checkpoint.ModeExec},
			"link":       {SHA256: sumOf("a.txt"), Size: 5, Mode: checkpoint.ModeSymlink, Link: "a.txt"},
		}},
		"awkward": {Files: map[string]checkpoint.Entry{
			`quote"and\back`: {SHA256: sumOf("1"), Size: 1, Mode: checkpoint.ModeFile},
			"html<&>":        {SHA256: sumOf("2"), Size: 2, Mode: checkpoint.ModeFile},
			"ünïcødé/日本.txt": {SHA256: sumOf("3"), Size: 3, Mode: checkpoint.ModeFile},
			"tab\tname":      {SHA256: sumOf("4"), Size: 4, Mode: checkpoint.ModeFile},
			"bad\xffutf8":    {SHA256: sumOf("5"), Size: 5, Mode: checkpoint.ModeFile},
			"l\u2028line":    {SHA256: sumOf("6"), Size: 6, Mode: checkpoint.ModeSymlink, Link: "<target>"},
			"z/big":          {SHA256: sumOf("7"), Size: 1 << 40, Mode: checkpoint.ModeExec},
		}},
	}
	for name, m := range manifests {
		data, err := checkpoint.MarshalManifest(m)
		if err != nil {
			t.Fatal(err)
		}
		want := sha256.Sum256(data)
		got, err := Digest(m)
		if err != nil || got != hex.EncodeToString(want[:]) {
			t.Errorf("%s: Digest = %s, %v; want %x (sha256 of manifest.json)", name, got, err, want)
		}
	}
}

func TestFromProtoRoundTripAndRefusals(t *testing.T) {
	m := &checkpoint.Manifest{Files: map[string]checkpoint.Entry{
		"a.txt":  {SHA256: sumOf("a"), Size: 1, Mode: checkpoint.ModeFile},
		"x.sh":   {SHA256: sumOf("x"), Size: 1, Mode: checkpoint.ModeExec},
		"d/link": {SHA256: sumOf("../a.txt"), Size: 8, Mode: checkpoint.ModeSymlink, Link: "../a.txt"},
	}}
	back, err := FromProto(ToProto(m), 0)
	if err != nil || !back.Equal(m) {
		t.Fatalf("round trip: %v, equal %v", err, back != nil && back.Equal(m))
	}
	file := func(p string) *decreev1.FileEntry {
		return &decreev1.FileEntry{Path: p, Sha256: sumOf("x"), Size: 1, Mode: WireFile}
	}
	link := func(p, target string) *decreev1.FileEntry {
		return &decreev1.FileEntry{Path: p, Sha256: sumOf(target), Size: int64(len(target)), Mode: WireSymlink, LinkTarget: target}
	}
	tests := []struct {
		name    string
		entries []*decreev1.FileEntry
		context bool
		want    error // nil: accepted
	}{
		{"dotdot", []*decreev1.FileEntry{file("../etc/passwd")}, false, fsutil.ErrUnsafePath},
		{"absolute", []*decreev1.FileEntry{file("/etc/passwd")}, false, fsutil.ErrUnsafePath},
		{"backslash", []*decreev1.FileEntry{file(`a\..\b`)}, false, fsutil.ErrUnsafePath},
		// Symlinks are data: any target a symlink can have is accepted.
		{"link to root", []*decreev1.FileEntry{link("l", "/")}, false, nil},
		{"venv python", []*decreev1.FileEntry{link("venv/bin/python", "/usr/bin/python3")}, false, nil},
		{"link up and out", []*decreev1.FileEntry{link("a/l", "../../x")}, false, nil},
		{"link dotdot after name", []*decreev1.FileEntry{link("l", "sub/../..")}, false, nil},
		{"link inside", []*decreev1.FileEntry{link("a/l", "../b")}, false, nil},
		{"link empty target", []*decreev1.FileEntry{link("l", "")}, false, fsutil.ErrUnsafePath},
		{"link NUL in target", []*decreev1.FileEntry{link("l", "a\x00b")}, false, fsutil.ErrUnsafePath},
		{"link target too long", []*decreev1.FileEntry{link("l", strings.Repeat("a/", 2048))}, false, fsutil.ErrUnsafePath},
		{"decree dir", []*decreev1.FileEntry{file(".decree/config.yml")}, false, ErrInvalid},
		{"decree context allowed to replicas", []*decreev1.FileEntry{file(".decree/migrations/a.spec.md")}, true, nil},
		{"decree non-context refused to replicas", []*decreev1.FileEntry{file(".decree/inbox/x.md")}, true, ErrInvalid},
		{"git dir", []*decreev1.FileEntry{file(".git/config")}, true, ErrInvalid},
		{"duplicate", []*decreev1.FileEntry{file("a"), file("a")}, false, ErrInvalid},
		{"below a file", []*decreev1.FileEntry{file("a"), file("a/b")}, false, ErrInvalid},
		{"below a link", []*decreev1.FileEntry{link("l", "d"), file("l/x")}, false, ErrInvalid},
		{"short hash", []*decreev1.FileEntry{{Path: "a", Sha256: "abc", Mode: WireFile}}, false, ErrInvalid},
		{"setuid mode", []*decreev1.FileEntry{{Path: "a", Sha256: sumOf("x"), Size: 1, Mode: 0o4755}}, false, ErrInvalid},
		{"too large", []*decreev1.FileEntry{{Path: "a", Sha256: sumOf("x"), Size: 2 << 30, Mode: WireFile}}, false, ErrInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			from := FromProto
			if tt.context {
				from = FromProtoWithContext
			}
			_, err := from(tt.entries, 1<<30)
			if tt.want == nil && err != nil || tt.want != nil && !errors.Is(err, tt.want) {
				t.Errorf("err = %v, want %v", err, tt.want)
			}
		})
	}
}
