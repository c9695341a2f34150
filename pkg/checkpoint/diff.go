package checkpoint

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// Side is one side of a file change: its mode and content (for a symlink,
// the target text). A nil *Side means the path does not exist on that side.
type Side struct {
	Mode Mode
	Data []byte
}

// Diff snapshots root and returns the diff from before to the current tree,
// and the current tree's manifest. The old contents come from the store
// (every snapshot stores what it sees), so before must have been produced by
// a snapshot of this Checkpointer's store.
func (c *Checkpointer) Diff(ctx context.Context, root string, before *Manifest) ([]byte, *Manifest, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	tree, err := c.snapshot(ctx, root, true)
	if err != nil {
		return nil, nil, err
	}
	after, err := c.withTracked(root, before, tree, true)
	if err != nil {
		return nil, nil, err
	}
	diff, err := c.diffManifests(ctx, root, before, after)
	if err != nil {
		return nil, nil, err
	}
	return diff, after, nil
}

func (c *Checkpointer) diffManifests(ctx context.Context, root string, before, after *Manifest) ([]byte, error) {
	var w bytes.Buffer
	for _, ch := range Compare(before, after) {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		old, err := c.side(ch.Path, ch.Before, "")
		if err != nil {
			return nil, err
		}
		nw, err := c.side(ch.Path, ch.After, root)
		if err != nil {
			return nil, err
		}
		WriteFileDiff(&w, ch.Path, old, nw)
	}
	return w.Bytes(), nil
}

// side loads the content of entry e: a link's target, the file at root (if
// root is set and the file still has the recorded hash) or the stored blob.
func (c *Checkpointer) side(path string, e *Entry, root string) (*Side, error) {
	if e == nil {
		return nil, nil
	}
	if e.Mode == ModeSymlink {
		return &Side{Mode: ModeSymlink, Data: []byte(e.Link)}, nil
	}
	if root != "" {
		data, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(path)))
		if err == nil {
			sum := sha256.Sum256(data)
			if hex.EncodeToString(sum[:]) == e.SHA256 {
				return &Side{Mode: e.Mode, Data: data}, nil
			}
		}
	}
	data, err := c.store.Get(e.SHA256)
	if err != nil {
		return nil, fmt.Errorf("diff %s: %w", path, err)
	}
	return &Side{Mode: e.Mode, Data: data}, nil
}

// WriteFileDiff appends the git-format diff section(s) for one path. A
// change between a symlink and a regular file is written as a deletion
// followed by a creation, as git does. Equal sides write nothing.
func WriteFileDiff(w *bytes.Buffer, path string, old, new *Side) {
	if old != nil && new != nil && (old.Mode == ModeSymlink) != (new.Mode == ModeSymlink) {
		WriteFileDiff(w, path, old, nil)
		WriteFileDiff(w, path, nil, new)
		return
	}
	if old == nil && new == nil {
		return
	}
	if old != nil && new != nil && old.Mode == new.Mode && bytes.Equal(old.Data, new.Data) {
		return
	}
	w.WriteString("diff --git ")
	w.WriteString(quoteName("a/" + path))
	w.WriteByte(' ')
	w.WriteString(quoteName("b/" + path))
	w.WriteByte('\n')
	var oldData, newData []byte
	oldID, newID := nullBlobID, nullBlobID
	var oldMode, newMode *Mode
	if old != nil {
		oldMode = &old.Mode
	}
	if new != nil {
		newMode = &new.Mode
	}
	modeSuffix := writeModeLines(w, oldMode, newMode)
	if old != nil {
		oldData, oldID = old.Data, gitBlobID(old.Data)
	}
	if new != nil {
		newData, newID = new.Data, gitBlobID(new.Data)
	}
	if old != nil && new != nil && bytes.Equal(oldData, newData) {
		return // mode change only
	}
	w.WriteString("index " + oldID + ".." + newID + modeSuffix + "\n")
	if len(oldData) == 0 && len(newData) == 0 {
		return // empty file created or deleted: headers say it all
	}
	oldName, newName := "/dev/null", "/dev/null"
	if old != nil {
		oldName = headerName("a/", path)
	}
	if new != nil {
		newName = headerName("b/", path)
	}
	if isBinary(oldData) || isBinary(newData) {
		w.WriteString("GIT binary patch\n")
		writeLiteral(w, newData)
		writeLiteral(w, oldData)
		return
	}
	w.WriteString("--- " + oldName + "\n")
	w.WriteString("+++ " + newName + "\n")
	writeHunks(w, oldData, newData)
}

// writeModeLines writes git's header lines for a file created, deleted or
// given a new mode (a nil mode is an absent side) and returns the
// " <mode>" suffix of the index line when the mode stays the same.
func writeModeLines(w io.Writer, before, after *Mode) string {
	switch {
	case before == nil:
		fmt.Fprintf(w, "new file mode %06o\n", uint32(*after))
	case after == nil:
		fmt.Fprintf(w, "deleted file mode %06o\n", uint32(*before))
	case *before != *after:
		fmt.Fprintf(w, "old mode %06o\nnew mode %06o\n", uint32(*before), uint32(*after))
	default:
		return fmt.Sprintf(" %06o", uint32(*after))
	}
	return ""
}
