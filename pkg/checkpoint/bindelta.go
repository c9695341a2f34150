package checkpoint

import (
	"bufio"
	"bytes"
	"compress/zlib"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"strconv"
)

// A change to a large file is written as git's binary "delta" form when
// the two sides share most of their bytes at the same offsets: an edit in
// place, an append, a truncation (a database page, a model's tensor, a
// dataset's row). Both sides are read once, in step, in blocks of
// deltaBlock bytes; equal blocks become copy instructions of the old side
// and differing blocks carry their bytes, so a 16-byte change in a 500 MB
// file makes a patch of a few hundred bytes that git apply reads forward
// and in reverse. A change that moves data (an insertion in the middle)
// shares few blocks at the same offsets; when the delta's own bytes would
// pass maxDeltaBytes, the change is written as literals, as before.
const (
	deltaBlock = 64
	// maxDeltaBytes bounds the new bytes a delta carries per direction;
	// it is held in memory until written.
	maxDeltaBytes = 4 << 20
	// maxCopy is the largest copy git's delta format encodes in one
	// instruction (three size bytes).
	maxCopy = 0xffffff
	// maxDeltaSource: copy offsets have four bytes, so the old side of a
	// delta must be under 4 GiB.
	maxDeltaSource = 1 << 32
)

// errNoDelta means the change is better written as literals.
var errNoDelta = errors.New("no useful delta")

// deltaBuilder collects git delta instructions turning one side into the
// other.
type deltaBuilder struct {
	buf      bytes.Buffer
	pending  []byte // bytes to insert, not yet written
	copyOff  int64  // start of the pending copy
	copyLen  int64  // length of the pending copy (0: none)
	inserted int64
}

func (d *deltaBuilder) header(srcSize, dstSize int64) {
	var tmp [10]byte
	for _, v := range []int64{srcSize, dstSize} {
		n := 0
		for {
			b := byte(v & 0x7f)
			v >>= 7
			if v != 0 {
				tmp[n] = b | 0x80
				n++
				continue
			}
			tmp[n] = b
			n++
			break
		}
		d.buf.Write(tmp[:n])
	}
}

// copyFrom adds a copy of n source bytes at off.
func (d *deltaBuilder) copyFrom(off, n int64) {
	if d.copyLen > 0 && d.copyOff+d.copyLen == off {
		d.copyLen += n
		return
	}
	d.flushCopy()
	d.flushInsert()
	d.copyOff, d.copyLen = off, n
}

// insert adds literal bytes.
func (d *deltaBuilder) insert(p []byte) error {
	if len(p) == 0 {
		return nil
	}
	d.flushCopy()
	d.inserted += int64(len(p))
	if d.inserted > maxDeltaBytes {
		return errNoDelta
	}
	d.pending = append(d.pending, p...)
	return nil
}

func (d *deltaBuilder) flushInsert() {
	for p := d.pending; len(p) > 0; {
		n := min(len(p), 0x7f)
		d.buf.WriteByte(byte(n))
		d.buf.Write(p[:n])
		p = p[n:]
	}
	d.pending = d.pending[:0]
}

func (d *deltaBuilder) flushCopy() {
	for d.copyLen > 0 {
		n := min(d.copyLen, maxCopy)
		op := byte(0x80)
		var args [7]byte
		k := 0
		for i := 0; i < 4; i++ {
			if b := byte(d.copyOff >> (8 * i)); b != 0 {
				op |= 1 << i
				args[k] = b
				k++
			}
		}
		for i := 0; i < 3; i++ {
			if b := byte(n >> (8 * i)); b != 0 {
				op |= 1 << (4 + i)
				args[k] = b
				k++
			}
		}
		d.buf.WriteByte(op)
		d.buf.Write(args[:k])
		d.copyOff += n
		d.copyLen -= n
	}
}

func (d *deltaBuilder) finish() []byte {
	d.flushCopy()
	d.flushInsert()
	return d.buf.Bytes()
}

// sideReader reads one side of a large change and hashes what it reads.
type sideReader struct {
	r     io.Reader
	git   hash.Hash // git blob id
	sum   hash.Hash // SHA-256, checked against the manifest
	size  int64
	read  int64
	close func() error
}

func newSideReader(rc io.ReadCloser, size int64) *sideReader {
	s := &sideReader{git: sha1.New(), sum: sha256.New(), size: size, close: rc.Close}
	s.git.Write([]byte("blob " + strconv.FormatInt(size, 10) + "\x00"))
	s.r = io.TeeReader(bufio.NewReaderSize(rc, 256<<10), io.MultiWriter(s.git, s.sum))
	return s
}

// next fills p (or up to the end of the side) and returns how many bytes.
func (s *sideReader) next(p []byte) (int, error) {
	n, err := io.ReadFull(s.r, p)
	s.read += int64(n)
	if err == io.ErrUnexpectedEOF || err == io.EOF {
		err = nil
	}
	return n, err
}

// done reads what is left (hashing it), then checks the size and the
// SHA-256 against e.
func (s *sideReader) done(e *Entry) error {
	n, err := io.Copy(io.Discard, s.r)
	s.read += n
	if err != nil {
		return err
	}
	if s.read != s.size {
		return fmt.Errorf("content is %d bytes, the manifest says %d (changed while diffing?)", s.read, s.size)
	}
	if got := hex.EncodeToString(s.sum.Sum(nil)); got != e.SHA256 {
		return fmt.Errorf("stored content hashes to %s, the manifest says %s (corrupt store?)", got, e.SHA256)
	}
	return nil
}

func (s *sideReader) gitID() string { return hex.EncodeToString(s.git.Sum(nil)) }

// binaryDeltas reads both sides of a change in step and returns the
// deltas old -> new and new -> old and both git blob ids, or errNoDelta
// when the sides share too little at the same offsets.
func (c *Checkpointer) binaryDeltas(path string, b, a *Entry) (fwd, rev []byte, oldID, newID string, err error) {
	if b.Size >= maxDeltaSource || a.Size >= maxDeltaSource {
		return nil, nil, "", "", errNoDelta
	}
	orc, err := c.openContent(path, *b)
	if err != nil {
		return nil, nil, "", "", err
	}
	old := newSideReader(orc, b.Size)
	defer old.close()
	nrc, err := c.openContent(path, *a)
	if err != nil {
		return nil, nil, "", "", err
	}
	nw := newSideReader(nrc, a.Size)
	defer nw.close()

	var f, r deltaBuilder
	f.header(b.Size, a.Size)
	r.header(a.Size, b.Size)
	const chunk = 256 << 10
	ob, nb := make([]byte, chunk), make([]byte, chunk)
	var off int64
	for {
		on, err := old.next(ob)
		if err != nil {
			return nil, nil, "", "", fmt.Errorf("diff %s: %w", path, err)
		}
		nn, err := nw.next(nb)
		if err != nil {
			return nil, nil, "", "", fmt.Errorf("diff %s: %w", path, err)
		}
		common := min(on, nn)
		for i := 0; i < common; i += deltaBlock {
			j := min(i+deltaBlock, common)
			if bytes.Equal(ob[i:j], nb[i:j]) {
				f.copyFrom(off+int64(i), int64(j-i))
				r.copyFrom(off+int64(i), int64(j-i))
				continue
			}
			if f.insert(nb[i:j]) != nil || r.insert(ob[i:j]) != nil {
				return nil, nil, "", "", errNoDelta
			}
		}
		// Past the end of one side: the rest of the other is new to it.
		if f.insert(nb[common:nn]) != nil || r.insert(ob[common:on]) != nil {
			return nil, nil, "", "", errNoDelta
		}
		off += int64(max(on, nn))
		if on < chunk && nn < chunk {
			break
		}
	}
	if err := old.done(b); err != nil {
		return nil, nil, "", "", fmt.Errorf("diff %s: %w", path, err)
	}
	if err := nw.done(a); err != nil {
		return nil, nil, "", "", fmt.Errorf("diff %s: %w", path, err)
	}
	return f.finish(), r.finish(), old.gitID(), nw.gitID(), nil
}

// writeDeltaHunk writes one "delta <size>" hunk of a GIT binary patch.
func writeDeltaHunk(w *bufio.Writer, delta []byte) error {
	w.WriteString("delta " + strconv.Itoa(len(delta)) + "\n")
	lw := &base85Lines{w: w}
	zw, _ := zlib.NewWriterLevel(lw, zlib.DefaultCompression)
	if _, err := zw.Write(delta); err != nil {
		return err
	}
	if err := zw.Close(); err != nil {
		return err
	}
	lw.flush()
	return w.WriteByte('\n')
}
