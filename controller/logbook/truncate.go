package logbook

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/decreehq/decree/internal/faultpoint"
	"github.com/decreehq/decree/pkg/fsutil"
)

// Limits of a book.
const (
	// DefaultMaxStreams is how many log streams one attempt may have
	// (routine, papermill, hook, router and a few more): a worker that
	// opens more is refused with ErrTooManyStreams.
	DefaultMaxStreams = 8
	// MaxChunkBytes is the largest chunk Append accepts. Workers send
	// chunks of at most 1 MiB - 16 KiB (logship.DefaultChunkSize); a
	// larger one is a bug or an attack.
	MaxChunkBytes = 1 << 20
)

// ErrTooManyStreams is wrapped when an attempt already has
// Options.MaxStreams log streams.
var ErrTooManyStreams = errors.New("too many log streams")

// ErrChunkTooLarge is wrapped when a chunk exceeds MaxChunkBytes.
var ErrChunkTooLarge = errors.New("log chunk too large")

// Options limit a book.
type Options struct {
	// MaxBytes returns the most bytes one log (a stream of an attempt)
	// keeps, or 0 for no limit; it is asked on every append, so a changed
	// configuration applies at once. A log over the limit keeps its tail:
	// it is rewritten as a notice line saying how many bytes were dropped
	// followed by its last MaxBytes bytes (while the attempt runs it is cut
	// in the background once it holds four times the limit and stays
	// under six times it, see trim.go; at the attempt's end it is cut to
	// exactly the limit).
	MaxBytes func() uint64
	// MaxStreams is how many streams one attempt may have
	// (DefaultMaxStreams when zero).
	MaxStreams int
	// Logger receives truncation failures; nil discards.
	Logger *slog.Logger
	// WriteFailed, when set, is told (from a goroutine of its own) of
	// every log write that failed, such as one that found the disk full:
	// the controller marks the disk full and says so (a worker's upload
	// only sees its call fail).
	WriteFailed func(k Key, err error)
}

func (b *Book) maxBytes() uint64 {
	if b.opts.MaxBytes == nil {
		return 0
	}
	return b.opts.MaxBytes()
}

func (b *Book) logTruncateError(k Key, err error) {
	if b.opts.Logger != nil {
		b.opts.Logger.Error("could not cut a log to its tail", "log", k.String(), "err", err)
	}
}

const noticePrefix = "[decree: log truncated: "

// noticeLine is the first line of a truncated log.
func noticeLine(dropped, max uint64) []byte {
	return fmt.Appendf(nil, "%sthe first %d bytes were dropped to keep it within max_log_bytes (%d bytes); its tail follows]\n", noticePrefix, dropped, max)
}

// markerPath is the file beside a truncated log that says it was cut
// (holding the notice line), so that a routine printing a notice-like
// first line cannot fake one. It is listed with the run's artifacts.
func markerPath(logPath string) string { return logPath + ".truncated" }

// readNotice returns the logical bytes dropped from the front of the log
// open as f and the length of its notice line (0, 0 when it was never cut).
func readNotice(f *os.File) (dropped uint64, header int64) {
	if _, err := os.Stat(markerPath(f.Name())); err != nil {
		return 0, 0
	}
	buf := make([]byte, 512)
	n, _ := f.ReadAt(buf, 0)
	line := buf[:n]
	i := bytes.IndexByte(line, '\n')
	if !bytes.HasPrefix(line, []byte(noticePrefix)) || i < 0 {
		return 0, 0
	}
	if _, err := fmt.Sscanf(string(line[len(noticePrefix):i]), "the first %d bytes", &dropped); err != nil {
		return 0, 0
	}
	return dropped, int64(i + 1)
}

// truncate rewrites lf's file as a notice line and its last max
// bytes, atomically (temporary file, rename), and reopens it.
func (b *Book) truncate(k Key, lf *logFile, max uint64) error {
	keepFrom := lf.fileSize - int64(max)
	if keepFrom <= lf.header {
		return nil
	}
	p := lf.f.Name()
	dropped := lf.dropped + uint64(keepFrom-lf.header)
	notice := noticeLine(dropped, max)
	tmp, err := os.CreateTemp(filepath.Dir(p), ".decree-log.tmp-*")
	if err != nil {
		return fmt.Errorf("cut log %s to its tail: %w", k, err)
	}
	defer os.Remove(tmp.Name())
	src, err := os.Open(p)
	if err == nil {
		err = copyRange(tmp, src, notice, keepFrom, keepFrom+int64(max))
		src.Close()
	}
	if err != nil {
		tmp.Close()
		return fmt.Errorf("cut log %s to its tail: %w", k, err)
	}
	// A kill here, after the run finished, leaves tmp in the run's
	// directory (see ending.go).
	faultpoint.HitAfter("log-cut-copied", 500*time.Millisecond)
	return installLocked(k, lf, p, tmp, notice, dropped, int64(len(notice))+int64(max))
}

// installLocked makes tmp, holding notice and the kept bytes (size bytes
// in all), the log at p: the marker is written, tmp renamed over p and
// reopened for appending in place of lf's file.
func installLocked(k Key, lf *logFile, p string, tmp *os.File, notice []byte, dropped uint64, size int64) error {
	err := tmp.Chmod(0o644)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = fsutil.WriteFileAtomic(markerPath(p), notice, 0o644)
	}
	if err == nil {
		err = os.Rename(tmp.Name(), p)
	}
	if err != nil {
		return fmt.Errorf("cut log %s to its tail: %w", k, err)
	}
	f, err := os.OpenFile(p, os.O_RDWR|os.O_APPEND, 0)
	if err != nil {
		return fmt.Errorf("reopen log %s after cutting it: %w", k, err)
	}
	// The replaced file is closed in the background: it is gone from the
	// directory, and closing its last descriptor frees its blocks, which
	// takes a file system 10-20 ms for a few hundred MB that nobody needs
	// to wait for.
	go lf.f.Close()
	lf.f = f
	lf.dropped, lf.header, lf.fileSize = dropped, int64(len(notice)), size
	return nil
}

// replaced reports whether the file at p is no longer the one open as f
// (a log cut to its tail is a new file).
func replaced(f *os.File, p string) bool {
	a, err1 := f.Stat()
	c, err2 := os.Stat(p)
	if errors.Is(err2, fs.ErrNotExist) {
		return false
	}
	return err1 == nil && err2 == nil && !os.SameFile(a, c)
}
