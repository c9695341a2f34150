package checkpoint

import (
	"bytes"
	"compress/zlib"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// Errors of the streaming store API.
var (
	// ErrBlobMismatch is wrapped when content does not hash to the SHA-256
	// it was offered under.
	ErrBlobMismatch = errors.New("content does not match its SHA-256")
	// ErrBlobTooLarge is wrapped when content exceeds the size limit given
	// to PutReader.
	ErrBlobTooLarge = errors.New("blob exceeds the size limit")
)

// Open returns a reader of the blob's content without loading a large blob
// into memory. Unlike Get it does not verify the hash: the caller hashes
// what it reads and compares (a loose blob is only checked once read).
func (s *Store) Open(sum string) (io.ReadCloser, error) {
	k, ok := parseSum(sum)
	if !ok {
		return nil, fmt.Errorf("object store: %q is not a SHA-256", sum)
	}
	if _, ok := s.lookup(k, false); ok {
		data, err := s.Get(sum) // packed blobs are small (at most bufferLimit)
		if err != nil {
			return nil, err
		}
		return io.NopCloser(bytes.NewReader(data)), nil
	}
	f, err := os.Open(s.loosePath(sum))
	if errors.Is(err, fs.ErrNotExist) {
		if _, ok := s.lookup(k, true); ok {
			data, err := s.Get(sum)
			if err != nil {
				return nil, err
			}
			return io.NopCloser(bytes.NewReader(data)), nil
		}
		return nil, fmt.Errorf("%w: blob %s", ErrMissingBlob, sum)
	}
	if err != nil {
		return nil, fmt.Errorf("object store: open blob %s: %w", sum, err)
	}
	var kind [1]byte
	if _, err := io.ReadFull(f, kind[:]); err != nil {
		f.Close()
		return nil, fmt.Errorf("object store: blob %s is empty or unreadable (corrupt store): %w", sum, err)
	}
	switch kind[0] {
	case blobRaw:
		return f, nil
	case blobZlib:
		zr, err := zlib.NewReader(f)
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("object store: blob %s is corrupt: %w", sum, err)
		}
		return readCloser{Reader: zr, close: func() error { zr.Close(); return f.Close() }}, nil
	}
	f.Close()
	return nil, fmt.Errorf("object store: blob %s has unknown format byte %q (corrupt store)", sum, kind[0])
}

type readCloser struct {
	io.Reader
	close func() error
}

func (r readCloser) Close() error { return r.close() }

// PutReader stores the content read from r under sum as a loose blob,
// streaming it through the hash and the compressor. It is stored only when
// r ends cleanly, the content hashes to sum and it is at most limit bytes
// (no limit when limit <= 0); otherwise nothing is left behind and the error
// wraps ErrBlobMismatch, ErrBlobTooLarge or r's error. It returns the
// content size. Content already stored is read, checked and discarded.
func (s *Store) PutReader(sum string, r io.Reader, limit int64) (int64, error) {
	if !ValidHash(sum) {
		return 0, fmt.Errorf("object store: %q is not a SHA-256 (64 lowercase hex digits)", sum)
	}
	tmp, err := os.CreateTemp(filepath.Join(s.dir, "packs"), "tmp-put-*")
	if err != nil {
		return 0, fmt.Errorf("object store: %w", err)
	}
	defer os.Remove(tmp.Name()) // a no-op once renamed
	h := sha256.New()
	tmp.Write([]byte{blobZlib})
	zw := zlibPool.Get().(*zlib.Writer)
	zw.Reset(tmp)
	src := r
	if limit > 0 {
		src = io.LimitReader(r, limit+1)
	}
	size, err := io.Copy(io.MultiWriter(h, zw), src)
	if err == nil {
		err = zw.Close()
	}
	zlibPool.Put(zw)
	if err == nil && limit > 0 && size > limit {
		err = fmt.Errorf("%w: blob %s is larger than %d bytes", ErrBlobTooLarge, sum, limit)
	}
	if err == nil {
		if got := hex.EncodeToString(h.Sum(nil)); got != sum {
			err = fmt.Errorf("%w: offered as %s, the %d bytes received hash to %s", ErrBlobMismatch, sum, size, got)
		}
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return size, err
	}
	if s.Has(sum) {
		return size, nil
	}
	final := s.loosePath(sum)
	if err := os.MkdirAll(filepath.Dir(final), 0o755); err != nil {
		return size, fmt.Errorf("object store: %w", err)
	}
	if err := os.Rename(tmp.Name(), final); err != nil {
		return size, fmt.Errorf("object store: %w", err)
	}
	return size, nil
}
