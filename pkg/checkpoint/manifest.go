package checkpoint

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"sort"
	"strconv"
	"weak"

	"github.com/decreehq/decree/pkg/fsutil"
)

// Mode is the kind and permission class of a tracked entry, with git's
// three values: a file is executable when its owner may execute it. The
// exact permission bits (600, 700, 664, ...) are kept beside it, in
// Manifest.Perms, so that diffs keep git's modes while a revert restores
// the bits exactly.
type Mode uint32

// The modes an Entry can have.
const (
	ModeFile    Mode = 0o100644
	ModeExec    Mode = 0o100755
	ModeSymlink Mode = 0o120000
)

// ModeOf maps a file mode from lstat to the tracked Mode.
func ModeOf(m fs.FileMode) Mode {
	switch {
	case m&fs.ModeSymlink != 0:
		return ModeSymlink
	case m&0o100 != 0:
		return ModeExec
	default:
		return ModeFile
	}
}

// String is the manifest spelling: "644", "755" or "120000".
func (m Mode) String() string {
	switch m {
	case ModeFile:
		return "644"
	case ModeExec:
		return "755"
	case ModeSymlink:
		return "120000"
	}
	return fmt.Sprintf("%o", uint32(m))
}

// Perm is the permission to create a regular file of this mode with.
func (m Mode) Perm() fs.FileMode {
	if m == ModeExec {
		return 0o755
	}
	return 0o644
}

// MarshalJSON writes the mode as a string ("644").
func (m Mode) MarshalJSON() ([]byte, error) { return json.Marshal(m.String()) }

// UnmarshalJSON reads "644", "755", "120000" (and git's "100644", "100755").
func (m *Mode) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("mode must be a string like \"644\": %w", err)
	}
	v, err := parseMode(s)
	if err != nil {
		return err
	}
	*m = v
	return nil
}

func parseMode(s string) (Mode, error) {
	switch s {
	case "644", "100644":
		return ModeFile, nil
	case "755", "100755":
		return ModeExec, nil
	case "120000":
		return ModeSymlink, nil
	}
	return 0, fmt.Errorf("unknown mode %q: want \"644\", \"755\" or \"120000\"", s)
}

// Entry describes one tracked file or symlink. For a symlink, SHA256 and
// Size describe the link target text and Link holds that text.
type Entry struct {
	SHA256 string `json:"sha256"`
	Size   int64  `json:"size"`
	Mode   Mode   `json:"mode"`
	Link   string `json:"link,omitempty"`
}

// Manifest records every tracked file of a tree at one point in time, keyed
// by slash-separated path relative to the root. Its JSON form is the
// manifest.json format: {"files": {"path": {"sha256", "size", "mode"}}},
// with "perm" added to the entry of a regular file whose permission bits
// are not its mode's usual ones.
type Manifest struct {
	Files map[string]Entry `json:"files"`
	// Perms holds the permission bits (0o777 at most) of the regular files
	// whose bits differ from their mode's default (0644 for "644", 0755 for
	// "755"): a file at 0600 or 0700. It is nil when every file has the
	// default; read it with PermOf. Entries, Compare and Equal leave the
	// bits out, as git does; Restore and Revert put them back.
	Perms map[string]fs.FileMode `json:"-"`
	// ExactPerms is set on every manifest a snapshot takes
	// ("exact_perms": true in manifest.json). A manifest written before
	// decree recorded permission bits lacks it: restoring to one keeps a
	// file's bits beyond git's mode as they are, instead of resetting every
	// 0600 file to 0644.
	ExactPerms bool `json:"exact_perms,omitempty"`
	// order, when set, is Files' paths sorted (a watched snapshot keeps
	// it up to date); Paths checks it before trusting it.
	order []string
	// A watched snapshot's manifest made from an earlier one (base) by
	// changing only the paths of delta: Compare with that base looks at
	// delta only. base is weak: it does not keep old manifests alive.
	base  weak.Pointer[Manifest]
	delta map[string]struct{}
}

// PermOf returns the permission bits path should have: Perms' value, or
// the default of the entry's mode. It is 0 for a symlink or a path not in
// the manifest.
func (m *Manifest) PermOf(path string) fs.FileMode {
	e, ok := m.Files[path]
	if !ok || e.Mode == ModeSymlink {
		return 0
	}
	if p, ok := m.Perms[path]; ok {
		return p
	}
	return e.Mode.Perm()
}

// lookup is m.Files[path] on a manifest that may be nil.
func (m *Manifest) lookup(path string) (Entry, bool) {
	if m == nil {
		return Entry{}, false
	}
	e, ok := m.Files[path]
	return e, ok
}

// setPerm records perm (masked to 0o777) for the regular file at path,
// keeping only bits that differ from the mode's default.
func (m *Manifest) setPerm(path string, mode Mode, perm fs.FileMode) {
	perm &= fs.ModePerm
	if mode == ModeSymlink || perm == mode.Perm() {
		if m.Perms != nil {
			delete(m.Perms, path)
		}
		return
	}
	if m.Perms == nil {
		m.Perms = map[string]fs.FileMode{}
	}
	m.Perms[path] = perm
}

// Paths returns the manifest's paths in sorted order.
func (m *Manifest) Paths() []string {
	if m.orderValid() {
		return slices.Clone(m.order)
	}
	return m.sortedPaths()
}

// orderValid reports whether m.order holds exactly m's paths, sorted:
// strictly increasing, as many as m has, each in m. A caller that
// changed Files since is caught.
func (m *Manifest) orderValid() bool {
	if m.order == nil || len(m.order) != len(m.Files) {
		return false
	}
	for i, p := range m.order {
		if i > 0 && m.order[i-1] >= p {
			return false
		}
		if _, ok := m.Files[p]; !ok {
			return false
		}
	}
	return true
}

func (m *Manifest) sortedPaths() []string {
	out := make([]string, 0, len(m.Files))
	for p := range m.Files {
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}

// Equal reports whether two manifests record the same files (entries;
// permission bits beyond git's modes are not compared: see Perms).
func (m *Manifest) Equal(o *Manifest) bool {
	if len(m.Files) != len(o.Files) {
		return false
	}
	for p, e := range m.Files {
		if oe, ok := o.Files[p]; !ok || oe != e {
			return false
		}
	}
	return true
}

// Change is one path that differs between two manifests. Before or After is
// nil when the path is absent on that side.
type Change struct {
	Path   string
	Before *Entry
	After  *Entry
}

// Compare lists the paths that differ between before and after, sorted.
func Compare(before, after *Manifest) []Change {
	if before != nil && after.delta != nil && after.base.Value() == before {
		// after is before with only the paths of delta changed.
		var out []Change
		for p := range after.delta {
			b, inB := before.Files[p]
			a, inA := after.Files[p]
			switch {
			case inB && !inA:
				out = append(out, Change{Path: p, Before: &b})
			case !inB && inA:
				out = append(out, Change{Path: p, After: &a})
			case inB && inA && a != b:
				out = append(out, Change{Path: p, Before: &b, After: &a})
			}
		}
		sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
		return out
	}
	var out []Change
	for p, b := range before.Files {
		b := b
		a, ok := after.Files[p]
		switch {
		case !ok:
			out = append(out, Change{Path: p, Before: &b})
		case a != b:
			a := a
			out = append(out, Change{Path: p, Before: &b, After: &a})
		}
	}
	for p, a := range after.Files {
		if _, ok := before.Files[p]; !ok {
			a := a
			out = append(out, Change{Path: p, After: &a})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out
}

// WriteManifest writes m as indented JSON to path, crash-safely.
func WriteManifest(path string, m *Manifest) error {
	data, err := MarshalManifest(m)
	if err != nil {
		return err
	}
	if err := fsutil.WriteFileAtomic(path, data, 0o644); err != nil {
		return fmt.Errorf("write manifest: %w", err)
	}
	return nil
}

// MarshalManifest encodes m as manifest.json: keys sorted, two-space
// indent, exactly what encoding/json's MarshalIndent writes, but written
// directly (50,000 entries in about ten milliseconds).
func MarshalManifest(m *Manifest) ([]byte, error) {
	if m.order != nil && len(m.order) == len(m.Files) {
		// The kept order is checked while it is used (each path in m,
		// strictly increasing): one lookup per path, no sort.
		if b, ok, err := marshalManifest(m, m.order, true); ok || err != nil {
			return b, err
		}
	}
	b, _, err := marshalManifest(m, m.sortedPaths(), false)
	return b, err
}

// marshalManifest writes m with its paths in the order given; with check
// set it gives up (ok false) at a path not in m or out of order.
func marshalManifest(m *Manifest, paths []string, check bool) (out []byte, ok bool, err error) {
	b := make([]byte, 0, len(paths)*(len(`      "sha256": "",`)+64+96)+64)
	if len(paths) == 0 {
		b = append(b, "{\n  \"files\": {}"...)
		if m.ExactPerms {
			b = append(b, ",\n  \"exact_perms\": true"...)
		}
		return append(b, "\n}\n"...), true, nil
	}
	b = append(b, "{\n  \"files\": {\n"...)
	for i, p := range paths {
		e, in := m.Files[p]
		if check && (!in || i > 0 && paths[i-1] >= p) {
			return nil, false, nil
		}
		b = append(b, "    "...)
		if b, err = appendJSONString(b, p); err != nil {
			return nil, false, fmt.Errorf("encode manifest: %w", err)
		}
		b = append(b, ": {\n      \"sha256\": \""...)
		b = append(b, e.SHA256...)
		b = append(b, "\",\n      \"size\": "...)
		b = strconv.AppendInt(b, e.Size, 10)
		b = append(b, ",\n      \"mode\": \""...)
		b = append(b, e.Mode.String()...)
		b = append(b, '"')
		if p, ok := m.Perms[p]; ok && e.Mode != ModeSymlink {
			b = append(b, ",\n      \"perm\": \""...)
			b = fmt.Appendf(b, "%03o", uint32(p))
			b = append(b, '"')
		}
		if e.Link != "" {
			b = append(b, ",\n      \"link\": "...)
			if b, err = appendJSONString(b, e.Link); err != nil {
				return nil, false, fmt.Errorf("encode manifest: %w", err)
			}
		}
		b = append(b, "\n    }"...)
		if i < len(paths)-1 {
			b = append(b, ',')
		}
		b = append(b, '\n')
	}
	b = append(b, "  }"...)
	if m.ExactPerms {
		b = append(b, ",\n  \"exact_perms\": true"...)
	}
	return append(b, "\n}\n"...), true, nil
}

// appendJSONString appends s as encoding/json quotes it: directly when it
// is printable ASCII that json leaves alone, else through json.Marshal
// (escapes, HTML-safe characters, invalid UTF-8).
func appendJSONString(b []byte, s string) ([]byte, error) {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, err := json.Marshal(s)
			if err != nil {
				return b, err
			}
			return append(b, q...), nil
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"'), nil
}

// ReadManifest reads and validates a manifest.json file.
func ReadManifest(path string) (*Manifest, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read manifest: %w", err)
	}
	m, err := UnmarshalManifest(data)
	if err != nil {
		return nil, fmt.Errorf("manifest %s: %w", path, err)
	}
	return m, nil
}

// UnmarshalManifest decodes and validates manifest.json content: every path
// must be a clean relative path and every hash 64 hex digits.
func UnmarshalManifest(data []byte) (*Manifest, error) {
	// Decoded with a plain string mode (a custom unmarshaler per entry
	// makes encoding/json several times slower), then converted.
	var raw struct {
		Files map[string]struct {
			SHA256 string `json:"sha256"`
			Size   int64  `json:"size"`
			Mode   string `json:"mode"`
			Perm   string `json:"perm"`
			Link   string `json:"link"`
		} `json:"files"`
		ExactPerms bool `json:"exact_perms"`
	}
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil, fmt.Errorf("decode manifest JSON: %w (the file is corrupt; restore it from backup)", err)
	}
	if raw.Files == nil {
		return nil, errors.New(`manifest has no "files" object (the file is corrupt or not a manifest)`)
	}
	m := Manifest{Files: make(map[string]Entry, len(raw.Files)), ExactPerms: raw.ExactPerms}
	for p, r := range raw.Files {
		mode, err := parseMode(r.Mode)
		if err != nil {
			return nil, fmt.Errorf("manifest entry %q: %w", p, err)
		}
		m.Files[p] = Entry{SHA256: r.SHA256, Size: r.Size, Mode: mode, Link: r.Link}
		if r.Perm != "" {
			perm, err := strconv.ParseUint(r.Perm, 8, 32)
			if err != nil || perm > 0o777 || mode == ModeSymlink || ModeOf(fs.FileMode(perm)) != mode {
				return nil, fmt.Errorf("manifest entry %q: perm %q must be octal permission bits (at most 777) agreeing with mode %s", p, r.Perm, mode)
			}
			m.setPerm(p, mode, fs.FileMode(perm))
		}
	}
	for p, e := range m.Files {
		if err := fsutil.CheckRelPath(p); err != nil {
			return nil, fmt.Errorf("manifest entry: %w", err)
		}
		if !ValidHash(e.SHA256) {
			return nil, fmt.Errorf("manifest entry %q: sha256 %q is not 64 lowercase hex digits", p, e.SHA256)
		}
		if e.Size < 0 {
			return nil, fmt.Errorf("manifest entry %q: negative size", p)
		}
		if (e.Mode == ModeSymlink) != (e.Link != "") && !(e.Mode == ModeSymlink && e.Size == 0) {
			return nil, fmt.Errorf("manifest entry %q: \"link\" must be set exactly for mode 120000", p)
		}
	}
	return &m, nil
}

// ValidHash reports whether s is a lower-case hex SHA-256, as manifests
// and the object store name contents.
func ValidHash(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}
