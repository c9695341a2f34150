package replica

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"

	"github.com/decreehq/decree/pkg/checkpoint"
	"github.com/decreehq/decree/pkg/checkpoint/ignore"
	"github.com/decreehq/decree/pkg/fsutil"
)

// statKey is what must be unchanged for a cached hash to be trusted.
type statKey struct {
	Size, Mtime, Ctime int64
	Ino                uint64
	Mode               uint32
}

type cacheEntry struct {
	Key statKey
	// Sum is the content's SHA-256 in hex, as manifests hold it (kept
	// encoded: a scan of an unchanged tree then allocates nothing per
	// file for it).
	Sum string
}

// statCache maps paths to the stat data and hash last seen. An entry is
// only ever recorded when its file's mtime and ctime are older than a
// stamp taken (from the file system's own clock) before the file was read
// or after it was written: a later change then necessarily moves the
// timestamps, so a cache hit is never stale (git's "racy clean" rule).
type statCache struct {
	Entries map[string]cacheEntry
}

func keyOf(fi fs.FileInfo) statKey {
	k := statKey{Size: fi.Size(), Mtime: fi.ModTime().UnixNano(), Mode: uint32(fi.Mode())}
	if ctime, ino, ok := fsutil.StatCtimeIno(fi); ok {
		k.Ctime, k.Ino = ctime, ino
	}
	return k
}

func (k statKey) olderThan(stamp int64) bool { return k.Mtime < stamp && k.Ctime < stamp }

const cacheMagic = "decree-replica-statcache-1\n"

func loadStatCache(path string) (*statCache, error) {
	c := &statCache{Entries: map[string]cacheEntry{}}
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return c, nil
	}
	if err != nil {
		return c, err
	}
	if err := c.decode(data); err != nil {
		return &statCache{Entries: map[string]cacheEntry{}}, fmt.Errorf("decode %s: %w", path, err)
	}
	return c, nil
}

func (c *statCache) decode(data []byte) error {
	rest, ok := bytes.CutPrefix(data, []byte(cacheMagic))
	if !ok {
		return errors.New("not a replica stat cache")
	}
	uv := func() uint64 {
		v, n := binary.Uvarint(rest)
		if n <= 0 {
			ok = false
			return 0
		}
		rest = rest[n:]
		return v
	}
	sv := func() int64 {
		v, n := binary.Varint(rest)
		if n <= 0 {
			ok = false
			return 0
		}
		rest = rest[n:]
		return v
	}
	count := uv()
	for i := uint64(0); ok && i < count; i++ {
		l := uv()
		if !ok || uint64(len(rest)) < l {
			return errors.New("truncated")
		}
		p := string(rest[:l])
		rest = rest[l:]
		var e cacheEntry
		e.Key.Size, e.Key.Mtime, e.Key.Ctime = sv(), sv(), sv()
		e.Key.Ino, e.Key.Mode = uv(), uint32(uv())
		if !ok || len(rest) < 32 {
			return errors.New("truncated")
		}
		e.Sum = hex.EncodeToString(rest[:32])
		rest = rest[32:]
		c.Entries[p] = e
	}
	if !ok || len(rest) != 0 {
		return errors.New("corrupt")
	}
	return nil
}

func (c *statCache) encode() []byte {
	b := make([]byte, 0, len(cacheMagic)+len(c.Entries)*96)
	b = append(b, cacheMagic...)
	b = binary.AppendUvarint(b, uint64(len(c.Entries)))
	for p, e := range c.Entries {
		b = binary.AppendUvarint(b, uint64(len(p)))
		b = append(b, p...)
		b = binary.AppendVarint(b, e.Key.Size)
		b = binary.AppendVarint(b, e.Key.Mtime)
		b = binary.AppendVarint(b, e.Key.Ctime)
		b = binary.AppendUvarint(b, e.Key.Ino)
		b = binary.AppendUvarint(b, uint64(e.Key.Mode))
		var sum [32]byte
		hex.Decode(sum[:], []byte(e.Sum))
		b = append(b, sum[:]...)
	}
	return b
}

func (r *Replica) saveCache() error {
	tmp, err := os.CreateTemp(r.dir, "statcache-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	_, err = tmp.Write(r.cache.encode())
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	return os.Rename(tmp.Name(), r.cachePath())
}

// stamp returns the file system's current time, read as the mtime of a
// file touched now: the reference of the racy-clean rule.
func (r *Replica) stamp() (int64, error) {
	p := filepath.Join(r.dir, "stamp")
	_ = os.Remove(p) // a new file gets the current time, whatever O_TRUNC does
	if err := os.WriteFile(p, nil, 0o644); err != nil {
		return 0, err
	}
	fi, err := os.Stat(p)
	if err != nil {
		return 0, err
	}
	return keyOf(fi).Mtime, nil
}

type hashJob struct {
	rel string
	abs string
	key statKey
}

// Scan walks the replica (skipping .decree/, .git/ and ignored paths) and
// returns its manifest; files whose stat data is unchanged since they were
// last hashed or written are not read.
func (r *Replica) Scan(ctx context.Context) (*checkpoint.Manifest, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	stamp, err := r.stamp()
	if err != nil {
		return nil, fmt.Errorf("replica scan: %w", err)
	}
	old := r.cache.Entries
	m := &checkpoint.Manifest{Files: make(map[string]checkpoint.Entry, len(old))}
	next := make(map[string]cacheEntry, len(old))
	var mu sync.Mutex
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	jobs := make(chan hashJob, 4*r.opts.Workers)
	var wg sync.WaitGroup
	for i := 0; i < r.opts.Workers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range jobs {
				if ctx.Err() != nil {
					continue
				}
				sum, size, err := hashFile(j.abs)
				if err != nil {
					cancel(fmt.Errorf("replica scan: read %s: %w", j.rel, err))
					continue
				}
				hexSum := hex.EncodeToString(sum[:])
				mu.Lock()
				m.Files[j.rel] = checkpoint.Entry{SHA256: hexSum, Size: size, Mode: checkpoint.ModeOf(fs.FileMode(j.key.Mode))}
				if size == j.key.Size && j.key.olderThan(stamp) {
					next[j.rel] = cacheEntry{Key: j.key, Sum: hexSum}
				}
				mu.Unlock()
			}
		}()
	}
	visit := func(rel string, info fs.FileInfo) error {
		if info.Mode()&fs.ModeSymlink != 0 {
			abs := filepath.Join(r.root, filepath.FromSlash(rel))
			target, err := os.Readlink(abs)
			if err != nil {
				return fmt.Errorf("read symlink %s: %w", rel, err)
			}
			sum := sha256.Sum256([]byte(target))
			mu.Lock()
			m.Files[rel] = checkpoint.Entry{SHA256: hex.EncodeToString(sum[:]), Size: int64(len(target)), Mode: checkpoint.ModeSymlink, Link: target}
			mu.Unlock()
			return nil
		}
		key := keyOf(info)
		if ce, ok := old[rel]; ok && ce.Key == key {
			mu.Lock()
			m.Files[rel] = checkpoint.Entry{SHA256: ce.Sum, Size: key.Size, Mode: checkpoint.ModeOf(info.Mode())}
			next[rel] = ce
			mu.Unlock()
			return nil
		}
		select {
		case jobs <- hashJob{rel: rel, abs: filepath.Join(r.root, filepath.FromSlash(rel)), key: key}:
			return nil
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
	walkErr := ignore.WalkConcurrent(ctx, r.root, r.opts.Workers, func(batch []ignore.File) error {
		for _, f := range batch {
			if err := visit(f.Rel, f.Info); err != nil {
				return err
			}
		}
		return nil
	})
	close(jobs)
	wg.Wait()
	if cause := context.Cause(ctx); cause != nil {
		return nil, cause
	}
	if walkErr != nil {
		return nil, fmt.Errorf("replica scan of %s: %w", r.root, walkErr)
	}
	changed := len(next) != len(old)
	if !changed {
		for p, e := range next {
			if old[p] != e {
				changed = true
				break
			}
		}
	}
	r.cache.Entries = next
	if !changed && !r.cacheDirty {
		return m, nil
	}
	if err := r.saveCache(); err != nil {
		r.log.Warn("replica stat cache not saved; the next scan rereads files", "err", err)
		return m, nil
	}
	r.cacheDirty = false
	return m, nil
}

var hashBufPool = sync.Pool{New: func() any { b := make([]byte, 256<<10); return &b }}

func hashFile(path string) ([32]byte, int64, error) {
	var sum [32]byte
	f, err := fsutil.OpenFileNoFollow(path)
	if err != nil {
		return sum, 0, err
	}
	defer f.Close()
	h := sha256.New()
	bp := hashBufPool.Get().(*[]byte)
	defer hashBufPool.Put(bp)
	n, err := io.CopyBuffer(h, onlyReader{f}, *bp)
	if err != nil {
		return sum, 0, err
	}
	copy(sum[:], h.Sum(nil))
	return sum, n, nil
}

// onlyReader hides WriterTo/ReaderFrom so CopyBuffer uses the buffer.
type onlyReader struct{ io.Reader }

// confined resolves rel below the replica root (fsutil.CheckRelPath plus
// the replica's own directory checks happen in the callers).
func (r *Replica) confined(rel string) (string, error) {
	if err := fsutil.CheckRelPath(rel); err != nil {
		return "", err
	}
	return filepath.Join(r.root, filepath.FromSlash(rel)), nil
}
