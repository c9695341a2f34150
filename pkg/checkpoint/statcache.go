package checkpoint

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"unsafe"
)

// statKey is what must be unchanged for a file's cached hash to be trusted,
// as in git's index: size, mtime, ctime, inode and mode.
type statKey struct {
	size  int64
	mtime int64 // ns
	ctime int64 // ns
	ino   uint64
	mode  uint32
}

type cacheEntry struct {
	key statKey
	sum [32]byte
}

// statCache maps paths to the stat data and hash seen at the last snapshot.
type statCache struct {
	root    string // the tree the entries describe; another root starts empty
	entries map[string]cacheEntry
}

const cacheMagic = "decree-statcache-2\n"

// loadStatCache reads the cache at path; a missing or unreadable cache is
// simply empty (it is only an accelerator), but is reported through err so
// the caller can log it.
func loadStatCache(path, root string) (*statCache, error) {
	c := &statCache{root: root, entries: map[string]cacheEntry{}}
	if path == "" {
		return c, nil
	}
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return c, nil
	}
	if err != nil {
		return c, fmt.Errorf("read stat cache %s: %w", path, err)
	}
	if err := c.decode(data); err != nil {
		c.entries = map[string]cacheEntry{}
		return c, fmt.Errorf("stat cache %s is corrupt, rebuilding it: %w", path, err)
	}
	if c.root != root {
		// Written for another tree: useless here.
		c.root, c.entries = root, map[string]cacheEntry{}
	}
	return c, nil
}

func (c *statCache) decode(data []byte) error {
	if !bytes.HasPrefix(data, []byte(cacheMagic)) {
		return errors.New("bad header")
	}
	d := cacheDecoder{b: data[len(cacheMagic):]}
	rl := d.uvarint()
	if d.bad || rl > uint64(len(d.b)) {
		return errors.New("bad root")
	}
	c.root = string(d.b[:rl])
	d.b = d.b[rl:]
	n := d.uvarint()
	if d.bad || n > uint64(len(data)) {
		return errors.New("bad entry count")
	}
	c.entries = make(map[string]cacheEntry, n)
	// Paths live in a few large chunks instead of one allocation each; a
	// chunk is never written again once a string points into it (paths are
	// prefix-compressed against the previous one).
	buf := make([]byte, 0, 2*len(data)+64)
	var prev []byte
	for i := uint64(0); i < n; i++ {
		shared, plen := d.uvarint(), d.uvarint()
		if d.bad || shared > uint64(len(prev)) || plen > uint64(len(d.b)) {
			return errors.New("bad path")
		}
		need := int(shared + plen)
		if cap(buf)-len(buf) < need {
			buf = make([]byte, 0, max(64<<10, 2*need))
		}
		start := len(buf)
		buf = append(buf, prev[:shared]...)
		buf = append(buf, d.b[:plen]...)
		d.b = d.b[plen:]
		prev = buf[start:]
		var e cacheEntry
		e.key = statKey{size: int64(d.uvarint()), mtime: int64(d.uvarint()), ctime: int64(d.uvarint()), ino: d.uvarint(), mode: uint32(d.uvarint())}
		if d.bad || len(d.b) < 32 {
			return errors.New("truncated")
		}
		copy(e.sum[:], d.b[:32])
		d.b = d.b[32:]
		c.entries[unsafe.String(unsafe.SliceData(prev), len(prev))] = e
	}
	return nil
}

// cacheDecoder reads uvarints from a byte slice, remembering any error.
type cacheDecoder struct {
	b   []byte
	bad bool
}

func (d *cacheDecoder) uvarint() uint64 {
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.bad = true
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (c *statCache) encode() []byte {
	paths := make([]string, 0, len(c.entries))
	for p := range c.entries {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	var buf bytes.Buffer
	w := bufio.NewWriter(&buf)
	w.WriteString(cacheMagic)
	var tmp [binary.MaxVarintLen64]byte
	put := func(v uint64) { w.Write(tmp[:binary.PutUvarint(tmp[:], v)]) }
	put(uint64(len(c.root)))
	w.WriteString(c.root)
	put(uint64(len(paths)))
	prev := ""
	for _, p := range paths {
		shared := 0
		for shared < len(p) && shared < len(prev) && p[shared] == prev[shared] {
			shared++
		}
		put(uint64(shared))
		put(uint64(len(p) - shared))
		w.WriteString(p[shared:])
		prev = p
		e := c.entries[p]
		put(uint64(e.key.size))
		put(uint64(e.key.mtime))
		put(uint64(e.key.ctime))
		put(e.key.ino)
		put(uint64(e.key.mode))
		w.Write(e.sum[:])
	}
	w.Flush()
	return buf.Bytes()
}

func (c *statCache) save(path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("save stat cache: %w", err)
	}
	// No fsync: the cache is only an accelerator, and a torn cache fails to
	// decode and is rebuilt, while a stale one is caught by its stat keys.
	if err := writeFileRename(path, c.encode(), 0o644); err != nil {
		return fmt.Errorf("save stat cache: %w", err)
	}
	return nil
}
