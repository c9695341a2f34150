// Package wiremanifest converts checkpoint manifests to and from the
// decree.v1 FileEntry list that replica workers and the controller
// exchange, validating everything that arrives from the other side, and
// computes the manifest digest both sides agree on.
//
// The digest (digest.go) is a two-level SHA-256 over the entries, grouped
// in DigestBuckets buckets by a hash of their path, so that a controller
// publishing a tree that changed in a few paths rehashes only their
// buckets. It leaves out the exact permission bits (Manifest.Perms and
// ExactPerms), which the wire does not carry: replicas keep git's two file
// modes.
//
// Wire modes are 0644, 0755 and 0120000 (git's 100644 and 100755 are
// accepted too).
package wiremanifest

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"path"
	"strings"

	"github.com/decreehq/decree/pkg/checkpoint"
	"github.com/decreehq/decree/pkg/fsutil"
	"github.com/decreehq/decree/pkg/layout"
	decreev1 "github.com/decreehq/decree/proto/decree/v1"
)

// ErrInvalid is wrapped by every validation error of FromProto.
var ErrInvalid = errors.New("invalid workspace manifest")

// Wire modes.
const (
	WireFile    uint32 = 0o644
	WireExec    uint32 = 0o755
	WireSymlink uint32 = 0o120000
)

// ToProto lists m's entries in path order.
func ToProto(m *checkpoint.Manifest) []*decreev1.FileEntry {
	out := make([]*decreev1.FileEntry, 0, len(m.Files))
	for _, p := range m.Paths() {
		out = append(out, EntryToProto(p, m.Files[p]))
	}
	return out
}

// EntryToProto is the wire form of the entry e at path p.
func EntryToProto(p string, e checkpoint.Entry) *decreev1.FileEntry {
	fe := &decreev1.FileEntry{Path: p, Sha256: e.SHA256, Size: e.Size, LinkTarget: e.Link, Mode: WireFile}
	switch e.Mode {
	case checkpoint.ModeExec:
		fe.Mode = WireExec
	case checkpoint.ModeSymlink:
		fe.Mode = WireSymlink
	}
	return fe
}

// FromProto builds a manifest from entries that arrived over the wire and
// checks them: clean relative paths (no "..", no absolute path, nothing
// under .decree/ or .git/), no duplicates, no entry below another entry
// (which would mean writing through a file or a symlink), 64-hex hashes,
// known modes, sizes within maxSize (no limit when <= 0), symlink targets
// that a symlink can have (see CheckLink: any target, also absolute or
// outside the root), and symlink hashes that match their target.
func FromProto(entries []*decreev1.FileEntry, maxSize int64) (*checkpoint.Manifest, error) {
	return fromProto(entries, maxSize, false)
}

// FromProtoWithContext is FromProto for a replica receiving the
// controller's manifest: it also accepts regular files at context paths
// (IsContextPath), the read-only project files under .decree/ that
// routines read.
func FromProtoWithContext(entries []*decreev1.FileEntry, maxSize int64) (*checkpoint.Manifest, error) {
	return fromProto(entries, maxSize, true)
}

// contextPrefixes are the parts of .decree/ a replica receives read-only:
// specs, prompts, routines (and files they source), the router guide, the
// configuration and processed.md. Nothing there ever comes back.
var contextPrefixes = []string{layout.Dir + "/" + layout.Migrations + "/", layout.Dir + "/" + layout.Prompts + "/", layout.Dir + "/" + layout.Routines + "/"}

var contextFiles = map[string]bool{layout.Dir + "/" + layout.RouterGuide: true, layout.Dir + "/" + layout.Config: true, layout.Dir + "/" + layout.Processed: true}

// IsContextPath reports whether p is a read-only context path under
// .decree/ that the controller sends to replicas with its manifest.
func IsContextPath(p string) bool {
	if contextFiles[p] {
		return true
	}
	for _, pre := range contextPrefixes {
		if strings.HasPrefix(p, pre) && len(p) > len(pre) {
			return true
		}
	}
	return false
}

// ContextDirs are the directories holding context paths.
func ContextDirs() []string {
	out := make([]string, len(contextPrefixes))
	for i, p := range contextPrefixes {
		out[i] = strings.TrimSuffix(p, "/")
	}
	return out
}

// ContextFiles are the single context files.
func ContextFiles() []string {
	return []string{layout.Dir + "/" + layout.Config, layout.Dir + "/" + layout.Processed, layout.Dir + "/" + layout.RouterGuide}
}

func fromProto(entries []*decreev1.FileEntry, maxSize int64, allowContext bool) (*checkpoint.Manifest, error) {
	m := &checkpoint.Manifest{Files: make(map[string]checkpoint.Entry, len(entries))}
	for _, fe := range entries {
		p := fe.GetPath()
		if err := fsutil.CheckRelPath(p); err != nil {
			return nil, fmt.Errorf("%w: entry %q: %w", ErrInvalid, p, err)
		}
		first, _, _ := strings.Cut(p, "/")
		context := allowContext && IsContextPath(p) && fe.GetMode() != WireSymlink
		if (first == layout.Dir && !context) || first == ".git" {
			return nil, fmt.Errorf("%w: entry %q lies under %s/, which is never synced", ErrInvalid, p, first)
		}
		if _, dup := m.Files[p]; dup {
			return nil, fmt.Errorf("%w: entry %q is listed twice", ErrInvalid, p)
		}
		if !checkpoint.ValidHash(fe.GetSha256()) {
			return nil, fmt.Errorf("%w: entry %q: sha256 %q is not 64 lowercase hex digits", ErrInvalid, p, fe.GetSha256())
		}
		if fe.GetSize() < 0 {
			return nil, fmt.Errorf("%w: entry %q has a negative size", ErrInvalid, p)
		}
		e := checkpoint.Entry{SHA256: fe.GetSha256(), Size: fe.GetSize()}
		switch fe.GetMode() {
		case WireFile, 0o100644:
			e.Mode = checkpoint.ModeFile
		case WireExec, 0o100755:
			e.Mode = checkpoint.ModeExec
		case WireSymlink:
			e.Mode = checkpoint.ModeSymlink
		default:
			return nil, fmt.Errorf("%w: entry %q has mode %o; want 644, 755 or 120000", ErrInvalid, p, fe.GetMode())
		}
		if e.Mode == checkpoint.ModeSymlink {
			if err := CheckLink(p, fe.GetLinkTarget()); err != nil {
				return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
			}
			sum := sha256.Sum256([]byte(fe.GetLinkTarget()))
			if hex.EncodeToString(sum[:]) != e.SHA256 || int64(len(fe.GetLinkTarget())) != e.Size {
				return nil, fmt.Errorf("%w: symlink %q: sha256 and size must describe the target text %q", ErrInvalid, p, fe.GetLinkTarget())
			}
			e.Link = fe.GetLinkTarget()
		} else {
			if fe.GetLinkTarget() != "" {
				return nil, fmt.Errorf("%w: entry %q has a link target but is not a symlink (mode 120000)", ErrInvalid, p)
			}
			if maxSize > 0 && e.Size > maxSize {
				return nil, fmt.Errorf("%w: %q is %d bytes, more than the limit of %d bytes; list it in .decreeignore or raise the limit", ErrInvalid, p, e.Size, maxSize)
			}
		}
		m.Files[p] = e
	}
	for p := range m.Files {
		for dir := path.Dir(p); dir != "."; dir = path.Dir(dir) {
			if _, ok := m.Files[dir]; ok {
				return nil, fmt.Errorf("%w: %q lies below %q, which is a file or symlink", ErrInvalid, p, dir)
			}
		}
	}
	return m, nil
}

// MaxLinkTarget is the longest symlink target accepted (Linux's PATH_MAX
// less the terminating NUL).
const MaxLinkTarget = 4095

// CheckLink checks the target text of a symlink at rel. Symlinks are data:
// a link is synced, stored and restored as a link with its target text
// exactly as written, absolute or climbing out of the project (a
// virtualenv's bin/python -> /usr/bin/python3), and decree never follows
// one or writes through one on either side. So only targets no symlink
// can have are refused: empty ones, ones with a NUL byte, and ones longer
// than MaxLinkTarget.
func CheckLink(rel, target string) error {
	switch {
	case target == "":
		return fmt.Errorf("%w: symlink %q has an empty target", fsutil.ErrUnsafePath, rel)
	case strings.ContainsRune(target, 0):
		return fmt.Errorf("%w: symlink %q has a NUL in its target", fsutil.ErrUnsafePath, rel)
	case len(target) > MaxLinkTarget:
		return fmt.Errorf("%w: symlink %q has a target of %d bytes, more than %d", fsutil.ErrUnsafePath, rel, len(target), MaxLinkTarget)
	}
	return nil
}
