package checkpoint

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"sort"
	"strconv"
	"strings"

	"github.com/bluekeyes/go-gitdiff/gitdiff"

	"github.com/decreehq/decree/pkg/fsutil"
)

// inMemoryDiffLimit is the largest diff RevertFile and ChangedFile read
// into memory; larger ones are read as a stream of section headers (a
// variable so tests can force the streaming path).
var inMemoryDiffLimit int64 = 64 << 20

// RevertFile undoes the diff stored at diffPath, like Revert. A diff
// larger than 64 MiB is not read into memory: only its section headers
// are (paths, modes and the blob ids of each side), the touched paths are
// checked to hold the diff's result and every other path to match before,
// and the tree is then put back from the store (Restore). A damaged header
// is ErrCorruptDiff; a damaged hunk of such a diff goes unnoticed, as the
// hunks are not needed to restore from the store.
func (c *Checkpointer) RevertFile(ctx context.Context, root, diffPath string, before *Manifest) error {
	fi, err := os.Stat(diffPath)
	if err != nil {
		return fmt.Errorf("revert: %w", err)
	}
	var heads []head
	if fi.Size() <= inMemoryDiffLimit {
		diff, err := os.ReadFile(diffPath)
		if err != nil {
			return fmt.Errorf("revert: %w", err)
		}
		if heads, err = readHeads(bytes.NewReader(diff)); err != nil {
			return err
		}
		if !touchesLarge(root, heads, before) {
			return c.Revert(ctx, root, diff, before)
		}
		// A small diff of a large file (a binary delta): applying it
		// would hold both sides in memory, so put the file back from
		// the store instead.
	} else if heads, err = readHeadsFile(diffPath); err != nil {
		return err
	}
	changed, err := changedHeads(root, heads)
	if err != nil {
		return err
	}
	if len(changed) > 0 {
		return fmt.Errorf("%w: %d path(s) changed since the diff was made; nothing was changed: %s", ErrConflict, len(changed), strings.Join(changed, ", "))
	}
	cur, err := c.currentManifest(ctx, root, before)
	if err != nil {
		return fmt.Errorf("revert: hash the current tree: %w", err)
	}
	touched := map[string]bool{}
	for _, h := range heads {
		touched[h.path] = true
	}
	var outside []string
	for _, ch := range Compare(before, cur) {
		if !touched[ch.Path] {
			outside = append(outside, ch.Path)
		}
	}
	if len(outside) > 0 {
		return fmt.Errorf("%w: %d path(s) the diff does not touch differ from the manifest; nothing was changed (files edited outside decree?): %s", ErrConflict, len(outside), strings.Join(first(outside, 50), ", "))
	}
	_, err = c.Restore(ctx, root, before)
	return err
}

// touchesLarge reports whether a diff section touches a file over
// StreamThreshold, on either side.
func touchesLarge(root string, heads []head, before *Manifest) bool {
	for _, h := range heads {
		if e, ok := before.Files[h.path]; ok && large(&e) {
			return true
		}
		if loc, err := locate(root, h.path); err == nil && loc.info != nil && loc.info.Mode().IsRegular() && loc.info.Size() > StreamThreshold {
			return true
		}
	}
	return false
}

// ChangedFile is Changed for the diff stored at diffPath, reading only its
// section headers and hashing the touched files as streams, so neither a
// large diff nor a large file is held in memory.
func ChangedFile(root, diffPath string) ([]string, error) {
	heads, err := readHeadsFile(diffPath)
	if err != nil {
		return nil, err
	}
	return changedHeads(root, heads)
}

// head is what a diff section's header says about its path.
type head struct {
	path    string
	deleted bool
	newID   string // full git blob id of the result ("" for a mode change alone)
	newMode Mode   // the result's mode, for a mode change alone
}

func readHeadsFile(p string) ([]head, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, fmt.Errorf("revert: %w", err)
	}
	defer f.Close()
	return readHeads(f)
}

// readHeads reads a diff as a stream and parses the header of each
// section ("diff --git" up to the first line of content) with go-gitdiff;
// content lines are skipped without being kept.
func readHeads(r io.Reader) ([]head, error) {
	br := bufio.NewReaderSize(r, 64<<10)
	var heads []head
	var cur bytes.Buffer
	inHeader, atStart, any := false, true, false
	flush := func() error {
		if cur.Len() == 0 {
			return nil
		}
		files, _, err := gitdiff.Parse(bytes.NewReader(cur.Bytes()))
		cur.Reset()
		if err != nil || len(files) != 1 {
			return fmt.Errorf("%w: a section header cannot be read (%v); the diff is damaged", ErrCorruptDiff, err)
		}
		f := files[0]
		h := head{path: f.NewName, deleted: f.IsDelete, newID: f.NewOIDPrefix}
		if f.IsDelete {
			h.path = f.OldName
		}
		if err := fsutil.CheckRelPath(h.path); err != nil {
			return fmt.Errorf("revert: refusing diff path: %w", err)
		}
		modeOnly := !f.IsNew && !f.IsDelete && h.newID == "" && f.OldMode != f.NewMode && f.NewMode != 0
		if modeOnly {
			m, ok := modeFromGit(f.NewMode)
			if !ok || m == ModeSymlink {
				return fmt.Errorf("%w: section %q has an unsupported mode %o", ErrCorruptDiff, h.path, f.NewMode)
			}
			h.newMode = m
		} else if !f.IsDelete && !fullOID(h.newID) {
			return fmt.Errorf("%w: section %q has no full blob id of its result; decree's diffs always carry one", ErrCorruptDiff, h.path)
		}
		heads = append(heads, h)
		return nil
	}
	for {
		line, err := br.ReadSlice('\n')
		if len(line) > 0 {
			any = true
		}
		if atStart && bytes.HasPrefix(line, []byte("diff --git ")) {
			if err := flush(); err != nil {
				return nil, err
			}
			inHeader = true
		} else if atStart && inHeader && (bytes.HasPrefix(line, []byte("--- ")) || bytes.HasPrefix(line, []byte("GIT binary patch")) || bytes.HasPrefix(line, []byte("@@ "))) {
			inHeader = false
		}
		if inHeader {
			if cur.Len()+len(line) > 1<<20 {
				return nil, fmt.Errorf("%w: a section header is over 1 MiB", ErrCorruptDiff)
			}
			cur.Write(line)
		}
		atStart = err == nil
		if err == bufio.ErrBufferFull {
			continue
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("revert: read the diff: %w", err)
		}
	}
	if err := flush(); err != nil {
		return nil, err
	}
	if len(heads) == 0 && any {
		return nil, fmt.Errorf("%w: no file sections found (not a git-format diff)", ErrCorruptDiff)
	}
	return heads, nil
}

// changedHeads lists the touched paths that no longer hold the diff's
// result, hashing files as streams.
func changedHeads(root string, heads []head) ([]string, error) {
	var out []string
	for _, h := range heads {
		loc, err := locate(root, h.path)
		if err != nil {
			return nil, err
		}
		exists := loc.info != nil && !loc.info.IsDir() && loc.viaLink == ""
		switch {
		case h.deleted:
			if exists {
				out = append(out, h.path)
			}
		case !exists:
			out = append(out, h.path)
		case h.newID == "": // a mode change alone
			if ModeOf(loc.info.Mode()) != h.newMode {
				out = append(out, h.path)
			}
		default:
			id, err := blobIDOf(loc.abs, loc.info)
			if err != nil {
				return nil, fmt.Errorf("check %s: %w", h.path, err)
			}
			if id != h.newID {
				out = append(out, h.path)
			}
		}
	}
	sort.Strings(out)
	return out, nil
}

// blobIDOf is the git blob id of a file (streamed) or of a link's target.
func blobIDOf(abs string, fi fs.FileInfo) (string, error) {
	if fi.Mode()&fs.ModeSymlink != 0 {
		t, err := os.Readlink(abs)
		if err != nil {
			return "", err
		}
		return gitBlobID([]byte(t)), nil
	}
	f, err := fsutil.OpenFileNoFollow(abs)
	if err != nil {
		return "", err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return "", err
	}
	h := sha1.New()
	h.Write([]byte("blob " + strconv.FormatInt(st.Size(), 10) + "\x00"))
	n, err := io.Copy(h, f)
	if err != nil {
		return "", err
	}
	if n != st.Size() {
		return "", errors.New("changed while being read")
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

func first(s []string, n int) []string {
	if len(s) > n {
		return append(s[:n:n], fmt.Sprintf("... and %d more", len(s)-n))
	}
	return s
}
