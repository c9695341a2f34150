package checkpoint

import (
	"bufio"
	"bytes"
	"compress/zlib"
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strconv"
)

// StreamThreshold is the size above which a file's change is written as a
// binary patch streamed from the file or the store, whatever its content:
// a line diff needs both sides in memory, so files this large are not line
// diffed. git apply reads such patches; GNU patch does not read binary
// patches. Below it, a change is diffed in memory as before.
const StreamThreshold = 8 << 20

// DiffTo is Diff writing the diff to w as it goes, so that memory stays
// bounded whatever the size of the files: a change where either side is
// larger than StreamThreshold is written as a "GIT binary patch" whose
// literals are deflated and base85-encoded while the content streams from
// the file or the store. It returns the current tree's manifest as
// Snapshot would return it at that moment (before's tracked files that
// the ignore rules now hide are in the diff, not in that manifest), with
// every content in the store.
func (c *Checkpointer) DiffTo(ctx context.Context, root string, before *Manifest, w io.Writer) (*Manifest, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	tree, err := c.snapshot(ctx, root, true)
	if err != nil {
		return nil, err
	}
	after, err := c.withTracked(root, before, tree, true)
	if err != nil {
		return nil, err
	}
	bw := bufio.NewWriterSize(w, 256<<10)
	if err := c.diffManifestsTo(ctx, root, before, after, bw); err != nil {
		return nil, err
	}
	if err := bw.Flush(); err != nil {
		return nil, fmt.Errorf("write diff: %w", err)
	}
	return tree, nil
}

func (c *Checkpointer) diffManifestsTo(ctx context.Context, root string, before, after *Manifest, w *bufio.Writer) error {
	var buf bytes.Buffer
	for _, ch := range splitTypeChanges(Compare(before, after)) {
		if err := ctx.Err(); err != nil {
			return err
		}
		if large(ch.Before) || large(ch.After) {
			if err := c.writeLargeDiff(w, ch); err != nil {
				return err
			}
			continue
		}
		old, err := c.side(ch.Path, ch.Before, "")
		if err != nil {
			return err
		}
		nw, err := c.side(ch.Path, ch.After, root)
		if err != nil {
			return err
		}
		buf.Reset()
		WriteFileDiff(&buf, ch.Path, old, nw)
		if _, err := w.Write(buf.Bytes()); err != nil {
			return fmt.Errorf("write diff: %w", err)
		}
	}
	return nil
}

func large(e *Entry) bool { return e != nil && e.Mode != ModeSymlink && e.Size > StreamThreshold }

// splitTypeChanges writes a change between a symlink and a regular file as
// a deletion followed by a creation, as WriteFileDiff does, so each half
// can be streamed or not on its own.
func splitTypeChanges(chs []Change) []Change {
	out := make([]Change, 0, len(chs))
	for _, ch := range chs {
		b, a := ch.Before, ch.After
		if b != nil && a != nil && (b.Mode == ModeSymlink) != (a.Mode == ModeSymlink) {
			out = append(out, Change{Path: ch.Path, Before: b}, Change{Path: ch.Path, After: a})
			continue
		}
		out = append(out, ch)
	}
	return out
}

// writeLargeDiff writes the section(s) of a change with a side over
// StreamThreshold as a binary patch, streaming each side twice (once for
// its git blob id, once for its literal).
func (c *Checkpointer) writeLargeDiff(w *bufio.Writer, ch Change) error {
	b, a := ch.Before, ch.After // never a symlink and a file (splitTypeChanges)
	open := func(e *Entry) func() (io.ReadCloser, error) {
		if e == nil {
			return func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(nil)), nil }
		}
		if e.Mode == ModeSymlink {
			return func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader([]byte(e.Link))), nil }
		}
		return func() (io.ReadCloser, error) { return c.openContent(ch.Path, *e) }
	}
	if b != nil && a != nil && b.SHA256 != a.SHA256 {
		fwd, rev, oldID, newID, err := c.binaryDeltas(ch.Path, b, a)
		switch {
		case err == nil:
			return writeDeltaDiff(w, ch.Path, b.Mode, a.Mode, oldID, newID, fwd, rev)
		case !errors.Is(err, errNoDelta):
			return err
		}
	}
	oldOpen, newOpen := open(b), open(a)
	oldID, newID := nullBlobID, nullBlobID
	var err error
	if b != nil {
		if oldID, err = streamBlobID(oldOpen, b.Size); err != nil {
			return fmt.Errorf("diff %s: %w", ch.Path, err)
		}
	}
	if a != nil {
		if newID, err = streamBlobID(newOpen, a.Size); err != nil {
			return fmt.Errorf("diff %s: %w", ch.Path, err)
		}
	}
	fmt.Fprintf(w, "diff --git %s %s\n", quoteName("a/"+ch.Path), quoteName("b/"+ch.Path))
	var oldMode, newMode *Mode
	if b != nil {
		oldMode = &b.Mode
	}
	if a != nil {
		newMode = &a.Mode
	}
	modeSuffix := writeModeLines(w, oldMode, newMode)
	if oldID == newID {
		return nil // mode change only
	}
	fmt.Fprintf(w, "index %s..%s%s\nGIT binary patch\n", oldID, newID, modeSuffix)
	var newSize, oldSize int64
	if a != nil {
		newSize = a.Size
	}
	if b != nil {
		oldSize = b.Size
	}
	if err := streamLiteral(w, newOpen, newSize); err != nil {
		return fmt.Errorf("diff %s: %w", ch.Path, err)
	}
	if err := streamLiteral(w, oldOpen, oldSize); err != nil {
		return fmt.Errorf("diff %s: %w", ch.Path, err)
	}
	return nil
}

// writeDeltaDiff writes a change of content (and perhaps mode) as a
// binary patch of two delta hunks: forward, then reverse.
func writeDeltaDiff(w *bufio.Writer, path string, oldMode, newMode Mode, oldID, newID string, fwd, rev []byte) error {
	fmt.Fprintf(w, "diff --git %s %s\n", quoteName("a/"+path), quoteName("b/"+path))
	modeSuffix := writeModeLines(w, &oldMode, &newMode)
	fmt.Fprintf(w, "index %s..%s%s\nGIT binary patch\n", oldID, newID, modeSuffix)
	if err := writeDeltaHunk(w, fwd); err != nil {
		return fmt.Errorf("diff %s: %w", path, err)
	}
	if err := writeDeltaHunk(w, rev); err != nil {
		return fmt.Errorf("diff %s: %w", path, err)
	}
	return nil
}

// openContent opens the stored blob of e (every snapshot stores what it
// sees, so the store has both sides; the store checks nothing while
// streaming, but the blob id and literal come from the same blob).
func (c *Checkpointer) openContent(path string, e Entry) (io.ReadCloser, error) {
	r, err := c.store.Open(e.SHA256)
	if err != nil {
		return nil, fmt.Errorf("diff %s: %w", path, err)
	}
	return r, nil
}

// streamBlobID is gitBlobID over a stream of known size; a stream of
// another size is an error (the file changed while being diffed).
func streamBlobID(open func() (io.ReadCloser, error), size int64) (string, error) {
	r, err := open()
	if err != nil {
		return "", err
	}
	defer r.Close()
	h := sha1.New()
	h.Write([]byte("blob " + strconv.FormatInt(size, 10) + "\x00"))
	n, err := io.Copy(h, r)
	if err != nil {
		return "", err
	}
	if n != size {
		return "", fmt.Errorf("content is %d bytes, the manifest says %d (changed while diffing?)", n, size)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// streamLiteral is writeLiteral over a stream of known size.
func streamLiteral(w *bufio.Writer, open func() (io.ReadCloser, error), size int64) error {
	w.WriteString("literal " + strconv.FormatInt(size, 10) + "\n")
	r, err := open()
	if err != nil {
		return err
	}
	defer r.Close()
	lw := &base85Lines{w: w}
	zw, _ := zlib.NewWriterLevel(lw, zlib.DefaultCompression)
	n, err := io.Copy(zw, r)
	if err == nil {
		err = zw.Close()
	}
	if err != nil {
		return err
	}
	lw.flush()
	if n != size {
		return fmt.Errorf("content is %d bytes, the manifest says %d (changed while diffing?)", n, size)
	}
	return w.WriteByte('\n')
}

// base85Lines writes deflated bytes as a binary patch's lines of at most
// 52 bytes each, exactly as writeLiteral does.
type base85Lines struct {
	w    *bufio.Writer
	line []byte
	enc  bytes.Buffer
}

func (b *base85Lines) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		k := min(52-len(b.line), len(p))
		b.line = append(b.line, p[:k]...)
		p = p[k:]
		if len(b.line) == 52 {
			b.emit()
		}
	}
	return n, nil
}

func (b *base85Lines) flush() {
	if len(b.line) > 0 {
		b.emit()
	}
}

func (b *base85Lines) emit() {
	n := len(b.line)
	if n <= 26 {
		b.w.WriteByte(byte('A' + n - 1))
	} else {
		b.w.WriteByte(byte('a' + n - 27))
	}
	b.enc.Reset()
	encode85(&b.enc, b.line)
	b.w.Write(b.enc.Bytes())
	b.w.WriteByte('\n')
	b.line = b.line[:0]
}
