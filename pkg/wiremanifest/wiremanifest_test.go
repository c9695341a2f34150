package wiremanifest

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/fnv"
	"maps"
	"math/rand"
	"sort"
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

// digestManifests are awkward manifests for the digest tests.
func digestManifests() map[string]*checkpoint.Manifest {
	return map[string]*checkpoint.Manifest{
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
			"new\nline":      {SHA256: sumOf("5"), Size: 5, Mode: checkpoint.ModeFile},
			"bad\xffutf8":    {SHA256: sumOf("8"), Size: 8, Mode: checkpoint.ModeFile},
			"l\u2028line":    {SHA256: sumOf("6"), Size: 6, Mode: checkpoint.ModeSymlink, Link: "<target>"},
			"z/big":          {SHA256: sumOf("7"), Size: 1 << 40, Mode: checkpoint.ModeExec},
		}},
		"many": manyEntries(5000),
	}
}

func manyEntries(n int) *checkpoint.Manifest {
	m := &checkpoint.Manifest{Files: map[string]checkpoint.Entry{}}
	for i := 0; i < n; i++ {
		p := fmt.Sprintf("pkg%02d/mod%02d/file%05d.go", i/1000, (i/20)%50, i)
		m.Files[p] = checkpoint.Entry{SHA256: sumOf(p), Size: int64(i), Mode: checkpoint.ModeFile}
	}
	return m
}

// referenceDigest is the digest's definition (see digest.go) written
// plainly, as the oracle: every path sorted, bucket sums of their records,
// the prefix and the sums hashed.
func referenceDigest(m *checkpoint.Manifest) string {
	var paths []string
	for p := range m.Files {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	records := make([][]byte, DigestBuckets)
	for _, p := range paths {
		e := m.Files[p]
		mode := map[checkpoint.Mode]uint64{checkpoint.ModeFile: 0o644, checkpoint.ModeExec: 0o755, checkpoint.ModeSymlink: 0o120000}[e.Mode]
		var r []byte
		for _, f := range []string{p, e.SHA256} {
			r = binary.AppendUvarint(r, uint64(len(f)))
			r = append(r, f...)
		}
		r = binary.AppendVarint(r, e.Size)
		r = binary.AppendUvarint(r, mode)
		r = binary.AppendUvarint(r, uint64(len(e.Link)))
		r = append(r, e.Link...)
		h := fnv.New64a()
		h.Write([]byte(p))
		b := h.Sum64() % DigestBuckets
		records[b] = append(records[b], r...)
	}
	all := sha256.New()
	all.Write([]byte("decree manifest digest 2\n"))
	for _, r := range records {
		s := sha256.Sum256(r)
		all.Write(s[:])
	}
	return hex.EncodeToString(all.Sum(nil))
}

// TestDigestMatchesDefinition checks Digest, and DigestEntries of the wire
// entries in any order, against the plainly written definition.
func TestDigestMatchesDefinition(t *testing.T) {
	for name, m := range digestManifests() {
		want := referenceDigest(m)
		if got, err := Digest(m); err != nil || got != want {
			t.Errorf("%s: Digest = %s, %v; want %s", name, got, err, want)
		}
		entries := ToProto(m) // path order
		if got := DigestEntries(entries); got != want {
			t.Errorf("%s: DigestEntries in path order = %s; want %s", name, got, want)
		}
		rand.New(rand.NewSource(1)).Shuffle(len(entries), func(i, j int) { entries[i], entries[j] = entries[j], entries[i] })
		if got := DigestEntries(entries); got != want {
			t.Errorf("%s: DigestEntries shuffled = %s; want %s", name, got, want)
		}
		sort.Slice(entries, func(i, j int) bool {
			a, b := entries[i].GetPath(), entries[j].GetPath()
			if BucketOf(a) != BucketOf(b) {
				return BucketOf(a) < BucketOf(b)
			}
			return a < b
		})
		if got := DigestEntries(entries); got != want {
			t.Errorf("%s: DigestEntries in digest order = %s; want %s", name, got, want)
		}
	}
	// The definition is fixed: controllers and workers of different
	// builds must agree on it. This value changes only with the prefix.
	if got, _ := Digest(digestManifests()["plain"]); got != "5e9bb8f5f5e5e3ec8b62757775ae5527118817018f0232dc203ffc90d578bc37" {
		t.Errorf("the digest of a fixed manifest changed to %s: bump the prefix's version when changing the definition", got)
	}
}

// TestDigestDetectsEveryChange changes one thing at a time in a manifest
// and checks the digest changes.
func TestDigestDetectsEveryChange(t *testing.T) {
	base := manyEntries(300)
	base.Files["ln"] = checkpoint.Entry{SHA256: sumOf("x"), Size: 1, Mode: checkpoint.ModeSymlink, Link: "x"}
	d0, _ := Digest(base)
	clone := func() *checkpoint.Manifest {
		return &checkpoint.Manifest{Files: maps.Clone(base.Files)}
	}
	p := "pkg00/mod03/file00077.go"
	changes := map[string]func(m *checkpoint.Manifest){
		"content": func(m *checkpoint.Manifest) { e := m.Files[p]; e.SHA256 = sumOf("other"); m.Files[p] = e },
		"size":    func(m *checkpoint.Manifest) { e := m.Files[p]; e.Size++; m.Files[p] = e },
		"mode":    func(m *checkpoint.Manifest) { e := m.Files[p]; e.Mode = checkpoint.ModeExec; m.Files[p] = e },
		"link":    func(m *checkpoint.Manifest) { e := m.Files["ln"]; e.Link = "y"; m.Files["ln"] = e },
		"delete":  func(m *checkpoint.Manifest) { delete(m.Files, p) },
		"add": func(m *checkpoint.Manifest) {
			m.Files["new"] = checkpoint.Entry{SHA256: sumOf(""), Mode: checkpoint.ModeFile}
		},
		"rename": func(m *checkpoint.Manifest) {
			m.Files[p+"x"] = m.Files[p]
			delete(m.Files, p)
		},
		"swap two contents": func(m *checkpoint.Manifest) {
			q := "pkg00/mod03/file00078.go"
			m.Files[p], m.Files[q] = m.Files[q], m.Files[p]
		},
	}
	for name, change := range changes {
		m := clone()
		change(m)
		if d, _ := Digest(m); d == d0 {
			t.Errorf("%s: the digest did not change", name)
		}
		if d := DigestEntries(ToProto(m)); d == d0 {
			t.Errorf("%s: DigestEntries did not change", name)
		}
	}
}

// TestBucketSumsAddUp builds the digest bucket by bucket from wire
// entries, as a controller does, and compares it with Digest.
func TestBucketSumsAddUp(t *testing.T) {
	m := manyEntries(3000)
	var buckets [DigestBuckets][]*decreev1.FileEntry
	for _, fe := range ToProto(m) { // path order: each bucket stays sorted
		b := BucketOf(fe.GetPath())
		buckets[b] = append(buckets[b], fe)
	}
	var sums BucketSums
	for i := range buckets {
		sums[i] = BucketSum(buckets[i])
	}
	if want, _ := Digest(m); sums.Digest() != want {
		t.Errorf("bucket sums give %s, Digest %s", sums.Digest(), want)
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
