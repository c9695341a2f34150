package logbook

import (
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/decreehq/decree/pkg/fsutil"
)

// Cutting a live log to its tail happens in the background, so a routine's
// output is written straight through: Append only writes its chunk.
//
// Once a live log holds four times its limit, a goroutine copies its last
// max bytes, behind a notice line, into a new file without holding the
// book's lock (the copy runs in the kernel where it can: copy_file_range
// on Linux), while appends go on into the old file. It then takes the
// lock, copies what was appended meanwhile (little), and renames the new
// file over the log, which followers notice as they do any cut. An Append
// that finds the log at six times its limit while a cut runs waits for
// it, so a live log stays under six times its limit plus a chunk (384 MiB
// with the default 64 MiB). The final cut, to exactly the limit, happens
// when the attempt ends, as before. Cutting late means fewer copies: a
// routine printing 200 MB under the default limit is copied once (64 MiB,
// at the end) instead of four times. Measured with BenchmarkCapped200MB:
// see the README.

// trimLocked starts a background cut of lf when it has reached four times
// max, and waits for a running one when it has reached six times max.
func (b *Book) trimLocked(k Key, lf *logFile, max uint64) {
	for lf.trimming && !lf.closed && uint64(lf.fileSize-lf.header) >= 6*max {
		b.trimmed.Wait()
	}
	if lf.trimming || lf.closed || uint64(lf.fileSize-lf.header) < 4*max || !b.isLiveLocked(k) {
		return
	}
	lf.trimming = true
	go b.trim(k, lf, lf.f.Name(), max, lf.fileSize, lf.header, lf.dropped)
}

// trim is the background cut of lf, at path p, whose file held end bytes (header of
// them a notice for dropped earlier bytes) when it started.
func (b *Book) trim(k Key, lf *logFile, p string, max uint64, end, header int64, dropped uint64) {
	err := b.trimFile(k, lf, p, max, end, header, dropped)
	b.mu.Lock()
	lf.trimming = false
	b.trimmed.Broadcast()
	b.mu.Unlock()
	if err != nil {
		b.logTruncateError(k, err)
	}
}

func (b *Book) trimFile(k Key, lf *logFile, p string, max uint64, end, header int64, dropped uint64) error {
	keepFrom := end - int64(max)
	dropped += uint64(keepFrom - header)
	notice := noticeLine(dropped, max)
	src, err := os.Open(p)
	if err != nil {
		return fmt.Errorf("cut log %s to its tail: %w", k, err)
	}
	defer src.Close()
	tmp, err := os.CreateTemp(filepath.Dir(p), ".decree-log.tmp-*")
	if err != nil {
		return fmt.Errorf("cut log %s to its tail: %w", k, err)
	}
	defer os.Remove(tmp.Name())
	defer tmp.Close()
	// The bulk, without the lock.
	if err := copyRange(tmp, src, notice, keepFrom, end); err != nil {
		return fmt.Errorf("cut log %s to its tail: %w", k, err)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if lf.closed {
		return nil // the attempt ended: closeLocked made the final cut
	}
	// What was appended meanwhile.
	if _, err := src.Seek(end, io.SeekStart); err != nil {
		return fmt.Errorf("cut log %s to its tail: %w", k, err)
	}
	rest, err := io.Copy(tmp, &io.LimitedReader{R: src, N: lf.fileSize - end})
	if err == nil && rest != lf.fileSize-end {
		err = fmt.Errorf("read %d of %d appended bytes", rest, lf.fileSize-end)
	}
	if err != nil {
		return fmt.Errorf("cut log %s to its tail: %w", k, err)
	}
	if err := installLocked(k, lf, p, tmp, notice, dropped, int64(len(notice))+int64(max)+rest); err != nil {
		return err
	}
	b.notifyLocked(k)
	return nil
}

// copyPiece is how much of a cut copyRange copies before it asks the
// kernel to start writing that piece out.
const copyPiece = 8 << 20

// copyRange writes notice, then src's bytes [from, to), into dst; an
// *os.File source behind a LimitedReader lets the runtime copy in the
// kernel (copy_file_range) where it can. It copies in pieces and starts
// each piece's writeback as soon as it is copied, so the fsync that
// follows a cut (at the attempt's end, on the critical path of the run)
// waits for the last piece rather than for the whole tail (measured in
// the README's benchmark notes).
func copyRange(dst, src *os.File, notice []byte, from, to int64) error {
	if _, err := dst.Write(notice); err != nil {
		return err
	}
	if _, err := src.Seek(from, io.SeekStart); err != nil {
		return err
	}
	written := int64(len(notice))
	for left := to - from; left > 0; {
		piece := min(left, copyPiece)
		n, err := io.Copy(dst, &io.LimitedReader{R: src, N: piece})
		if err == nil && n != piece {
			err = fmt.Errorf("read %d of %d bytes", to-from-left+n, to-from)
		}
		if err != nil {
			return err
		}
		fsutil.StartWriteback(dst, written, n)
		written += n
		left -= n
	}
	return nil
}
