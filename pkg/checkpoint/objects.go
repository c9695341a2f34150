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
	"strings"
	"sync"
)

// Store is a content-addressed store of file contents keyed by SHA-256.
//
// Layout under its directory:
//
//	packs/pack-*.pack   blobs written by one snapshot, back to back
//	packs/pack-*.idx    the pack's index: SHA-256 -> offset and length
//	xx/yyyy...          loose blobs (files too large to buffer, and Put)
//
// Every blob is one format byte ('z' zlib at the fast level, or 'r' raw
// when compression does not help) followed by the data. A snapshot writes
// one pack instead of one file per blob (file creation dominates the cost on
// virtual disks), and makes it visible only when complete: the pack is
// renamed into place before its index, and a pack without index is ignored.
// Get verifies the hash of what it returns.
//
// Hard links or reflinks to the working files are deliberately not used:
// routines modify files in place, which would alter the stored "before"
// content. Nothing is deleted except by Prune.
type Store struct {
	dir string

	mu     sync.RWMutex
	index  map[[32]byte]packLoc
	loaded map[string]bool // idx files read
}

type packLoc struct {
	pack   string // file name under packs/
	offset int64
	length int64
}

const (
	blobZlib = 'z'
	blobRaw  = 'r'
)

// OpenStore opens (creating if needed) the object store in dir.
func OpenStore(dir string) (*Store, error) {
	if err := os.MkdirAll(filepath.Join(dir, "packs"), 0o755); err != nil {
		return nil, fmt.Errorf("create object store %s: %w", dir, err)
	}
	return &Store{dir: dir, index: map[[32]byte]packLoc{}, loaded: map[string]bool{}}, nil
}

// Dir returns the store's directory.
func (s *Store) Dir() string { return s.dir }

func (s *Store) loosePath(sum string) string {
	return filepath.Join(s.dir, sum[:2], sum[2:])
}

func parseSum(sum string) ([32]byte, bool) {
	var k [32]byte
	if !ValidHash(sum) {
		return k, false
	}
	hex.Decode(k[:], []byte(sum))
	return k, true
}

// Has reports whether the blob with this SHA-256 (hex) is stored.
func (s *Store) Has(sum string) bool {
	k, ok := parseSum(sum)
	if !ok {
		return false
	}
	if _, ok := s.lookup(k, false); ok {
		return true
	}
	_, err := os.Stat(s.loosePath(sum))
	return err == nil
}

// lookup finds a packed blob, reading new index files when refresh is set
// or nothing was read yet.
func (s *Store) lookup(k [32]byte, refresh bool) (packLoc, bool) {
	s.mu.RLock()
	loc, ok := s.index[k]
	first := len(s.loaded) == 0
	s.mu.RUnlock()
	if ok || (!refresh && !first) {
		return loc, ok
	}
	s.loadIndexes()
	s.mu.RLock()
	loc, ok = s.index[k]
	s.mu.RUnlock()
	return loc, ok
}

// loadIndexes reads every pack index not read yet.
func (s *Store) loadIndexes() {
	entries, _ := os.ReadDir(filepath.Join(s.dir, "packs"))
	s.mu.Lock()
	defer s.mu.Unlock()
	s.loaded[""] = true // mark "scanned at least once"
	for _, e := range entries {
		name := e.Name()
		if !strings.HasSuffix(name, ".idx") || s.loaded[name] {
			continue
		}
		data, err := os.ReadFile(filepath.Join(s.dir, "packs", name))
		if err != nil {
			continue
		}
		pack := strings.TrimSuffix(name, ".idx") + ".pack"
		locs, err := decodeIndex(data, pack)
		if err != nil {
			continue // a damaged index: its blobs read as missing
		}
		for k, l := range locs {
			s.index[k] = l
		}
		s.loaded[name] = true
	}
}

// compressBlob returns the stored form of data.
func compressBlob(data []byte, buf *bytes.Buffer) []byte {
	buf.Reset()
	buf.WriteByte(blobZlib)
	zw := zlibPool.Get().(*zlib.Writer)
	zw.Reset(buf)
	zw.Write(data)
	zw.Close()
	zlibPool.Put(zw)
	if buf.Len() >= len(data)+1 {
		buf.Reset()
		buf.WriteByte(blobRaw)
		buf.Write(data)
	}
	return buf.Bytes()
}

var zlibPool = sync.Pool{New: func() any {
	w, _ := zlib.NewWriterLevel(io.Discard, zlib.BestSpeed)
	return w
}}

// Put stores data, whose SHA-256 (hex) is sum, as a loose blob if it is not
// stored yet.
func (s *Store) Put(sum string, data []byte) error {
	if s.Has(sum) {
		return nil
	}
	var buf bytes.Buffer
	blob := compressBlob(data, &buf)
	final := s.loosePath(sum)
	if err := os.MkdirAll(filepath.Dir(final), 0o755); err != nil {
		return fmt.Errorf("object store: %w", err)
	}
	if err := writeFileRename(final, blob, 0o444); err != nil {
		return fmt.Errorf("object store: %w", err)
	}
	return nil
}

// putFile streams the file at path into a loose blob, hashing it on the
// way, and returns its SHA-256 and size. Used for files too large to buffer.
func (s *Store) putFile(path string, durable bool) (sum string, size int64, stored bool, err error) {
	f, err := os.Open(path)
	if err != nil {
		return "", 0, false, err
	}
	defer f.Close()
	tmp, err := os.CreateTemp(filepath.Join(s.dir, "packs"), "tmp-blob-*")
	if err != nil {
		return "", 0, false, fmt.Errorf("object store: %w", err)
	}
	defer os.Remove(tmp.Name())
	h := sha256.New()
	tmp.Write([]byte{blobZlib})
	zw := zlibPool.Get().(*zlib.Writer)
	zw.Reset(tmp)
	size, err = io.Copy(io.MultiWriter(h, zw), f)
	if err == nil {
		err = zw.Close()
	}
	zlibPool.Put(zw)
	if err == nil && durable {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", 0, false, fmt.Errorf("store %s: %w", path, err)
	}
	sum = hex.EncodeToString(h.Sum(nil))
	if s.Has(sum) {
		return sum, size, false, nil
	}
	final := s.loosePath(sum)
	if err := os.MkdirAll(filepath.Dir(final), 0o755); err != nil {
		return "", 0, false, fmt.Errorf("object store: %w", err)
	}
	if err := os.Rename(tmp.Name(), final); err != nil {
		return "", 0, false, fmt.Errorf("object store: %w", err)
	}
	return sum, size, true, nil
}

// ErrMissingBlob is wrapped when a blob needed for a diff is not stored.
var ErrMissingBlob = errors.New("content missing from the object store")

// Get returns the content of the blob with this SHA-256, verified.
func (s *Store) Get(sum string) ([]byte, error) {
	k, ok := parseSum(sum)
	if !ok {
		return nil, fmt.Errorf("object store: %q is not a SHA-256", sum)
	}
	var raw []byte
	var err error
	if loc, ok := s.lookup(k, false); ok {
		raw, err = readPacked(filepath.Join(s.dir, "packs", loc.pack), loc)
	} else {
		raw, err = os.ReadFile(s.loosePath(sum))
		if errors.Is(err, fs.ErrNotExist) {
			if loc, ok := s.lookup(k, true); ok { // written by another process since
				raw, err = readPacked(filepath.Join(s.dir, "packs", loc.pack), loc)
			}
		}
	}
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w: blob %s (the store %s was pruned, or the snapshot that should have stored it did not complete)", ErrMissingBlob, sum, s.dir)
	}
	if err != nil {
		return nil, fmt.Errorf("object store: read blob %s: %w", sum, err)
	}
	return decodeBlob(sum, raw)
}

func readPacked(path string, loc packLoc) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	raw := make([]byte, loc.length)
	if _, err := f.ReadAt(raw, loc.offset); err != nil {
		return nil, fmt.Errorf("pack %s is truncated: %w", path, err)
	}
	return raw, nil
}

func decodeBlob(sum string, raw []byte) ([]byte, error) {
	if len(raw) == 0 {
		return nil, fmt.Errorf("object store: blob %s is empty (corrupt store)", sum)
	}
	var data []byte
	switch raw[0] {
	case blobRaw:
		data = raw[1:]
	case blobZlib:
		zr, err := zlib.NewReader(bytes.NewReader(raw[1:]))
		if err == nil {
			data, err = io.ReadAll(zr)
		}
		if err != nil {
			return nil, fmt.Errorf("object store: blob %s is corrupt: %w", sum, err)
		}
	default:
		return nil, fmt.Errorf("object store: blob %s has unknown format byte %q (corrupt store)", sum, raw[0])
	}
	got := sha256.Sum256(data)
	if hex.EncodeToString(got[:]) != sum {
		return nil, fmt.Errorf("object store: blob %s is corrupt (content hashes to %x)", sum, got)
	}
	return data, nil
}
