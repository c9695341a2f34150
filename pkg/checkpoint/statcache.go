package checkpoint

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
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
	sum string // SHA-256, 64 hex digits
}

// statCache holds the stat data and hash of every file seen at the last
// snapshot of one root.
//
// File format (little endian):
//
//	"decree-statcache-3\n"
//	uvarint len, root
//	uvarint number of directories, then per directory (sorted by path):
//	  uvarint len, dir path ("" for the root); uvarint entries; uvarint bytes
//	  entries sorted by name: uvarint len, name; size, mtime, ctime, ino,
//	  mode as 8 bytes each; 64 hex digits of SHA-256
//
// Loading indexes only the directories; a snapshot then merges each
// directory's sorted listing with its block, and cached hashes become
// manifest strings without copying (they point into the loaded file).
type statCache struct {
	root string
	dirs map[string][]byte // dir -> its encoded entries
	n    int
}

const cacheMagic = "decree-statcache-3\n"

const cacheFixed = 5*8 + 64

// loadStatCache reads the cache at path; a missing or unreadable cache is
// simply empty (it is only an accelerator), but is reported through err so
// the caller can log it.
func loadStatCache(path, root string) (*statCache, error) {
	c := &statCache{root: root, dirs: map[string][]byte{}}
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
		c.dirs, c.n = map[string][]byte{}, 0
		return c, fmt.Errorf("stat cache %s is corrupt, rebuilding it: %w", path, err)
	}
	if c.root != root {
		c.root, c.dirs, c.n = root, map[string][]byte{}, 0 // written for another tree
	}
	return c, nil
}

func zstring(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }

func (c *statCache) decode(data []byte) error {
	if !bytes.HasPrefix(data, []byte(cacheMagic)) {
		return errors.New("bad header")
	}
	d := cacheDecoder{b: data[len(cacheMagic):]}
	c.root = string(d.bytes())
	ndirs := d.uvarint()
	if d.bad || ndirs > uint64(len(data)) {
		return errors.New("bad directory count")
	}
	c.dirs = make(map[string][]byte, ndirs)
	for i := uint64(0); i < ndirs; i++ {
		dir := d.bytes()
		count := d.uvarint()
		size := d.uvarint()
		if d.bad || size > uint64(len(d.b)) {
			return errors.New("bad directory block")
		}
		block := d.b[:size]
		d.b = d.b[size:]
		// Check the block's shape now, so lookups need not.
		bd := cacheDecoder{b: block}
		for j := uint64(0); j < count; j++ {
			bd.bytes()
			if bd.bad || len(bd.b) < cacheFixed {
				return errors.New("truncated directory block")
			}
			bd.b = bd.b[cacheFixed:]
		}
		if len(bd.b) != 0 {
			return errors.New("directory block size mismatch")
		}
		c.dirs[zstring(dir)] = block
		c.n += int(count)
	}
	if d.bad || len(d.b) != 0 {
		return errors.New("trailing data")
	}
	return nil
}

// cacheDecoder reads from a byte slice, remembering any error.
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

func (d *cacheDecoder) bytes() []byte {
	n := d.uvarint()
	if d.bad || n > uint64(len(d.b)) {
		d.bad = true
		return nil
	}
	v := d.b[:n]
	d.b = d.b[n:]
	return v
}

// dirCursor walks one directory's block in name order.
type dirCursor struct {
	b []byte
}

func (c *statCache) cursor(dir string) dirCursor { return dirCursor{b: c.dirs[dir]} }

// find advances to name (names must be asked in increasing order) and
// returns its key and hex hash (pointing into the cache file).
func (cur *dirCursor) find(name string) (statKey, string, bool) {
	for len(cur.b) > 0 {
		n, w := binary.Uvarint(cur.b)
		got := cur.b[w : w+int(n)]
		rest := cur.b[w+int(n):]
		switch cmp := strings.Compare(zstring(got), name); {
		case cmp < 0:
			cur.b = rest[cacheFixed:]
			continue
		case cmp > 0:
			return statKey{}, "", false
		}
		le := binary.LittleEndian
		k := statKey{
			size:  int64(le.Uint64(rest[0:])),
			mtime: int64(le.Uint64(rest[8:])),
			ctime: int64(le.Uint64(rest[16:])),
			ino:   le.Uint64(rest[24:]),
			mode:  uint32(le.Uint64(rest[32:])),
		}
		sum := zstring(rest[40:104])
		cur.b = rest[cacheFixed:]
		return k, sum, true
	}
	return statKey{}, "", false
}

// encodeStatCache writes the cache for root from path -> entry.
func encodeStatCache(root string, entries map[string]cacheEntry) []byte {
	type item struct{ dir, name, path string }
	items := make([]item, 0, len(entries))
	for p := range entries {
		dir, name := "", p
		if i := strings.LastIndexByte(p, '/'); i >= 0 {
			dir, name = p[:i], p[i+1:]
		}
		items = append(items, item{dir, name, p})
	}
	sort.Slice(items, func(i, j int) bool {
		if items[i].dir != items[j].dir {
			return items[i].dir < items[j].dir
		}
		return items[i].name < items[j].name
	})
	var out bytes.Buffer
	var tmp [binary.MaxVarintLen64]byte
	putU := func(w *bytes.Buffer, v uint64) { w.Write(tmp[:binary.PutUvarint(tmp[:], v)]) }
	putS := func(w *bytes.Buffer, s string) { putU(w, uint64(len(s))); w.WriteString(s) }
	out.WriteString(cacheMagic)
	putS(&out, root)
	ndirs := 0
	for i := range items {
		if i == 0 || items[i].dir != items[i-1].dir {
			ndirs++
		}
	}
	putU(&out, uint64(ndirs))
	var block bytes.Buffer
	var fixed [cacheFixed]byte
	le := binary.LittleEndian
	for i := 0; i < len(items); {
		j := i
		block.Reset()
		for ; j < len(items) && items[j].dir == items[i].dir; j++ {
			e := entries[items[j].path]
			putS(&block, items[j].name)
			le.PutUint64(fixed[0:], uint64(e.key.size))
			le.PutUint64(fixed[8:], uint64(e.key.mtime))
			le.PutUint64(fixed[16:], uint64(e.key.ctime))
			le.PutUint64(fixed[24:], e.key.ino)
			le.PutUint64(fixed[32:], uint64(e.key.mode))
			copy(fixed[40:], e.sum)
			block.Write(fixed[:])
		}
		putS(&out, items[i].dir)
		putU(&out, uint64(j-i))
		putU(&out, uint64(block.Len()))
		out.Write(block.Bytes())
		i = j
	}
	return out.Bytes()
}

func saveStatCache(path, root string, entries map[string]cacheEntry) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("save stat cache: %w", err)
	}
	// No fsync: the cache is only an accelerator, and a torn cache fails to
	// decode and is rebuilt, while a stale one is caught by its stat keys.
	if err := writeFileRename(path, encodeStatCache(root, entries), 0o644); err != nil {
		return fmt.Errorf("save stat cache: %w", err)
	}
	return nil
}
