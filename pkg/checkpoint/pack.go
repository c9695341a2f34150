package checkpoint

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
)

const idxMagic = "decree-packidx-1\n"

// packWriter appends blobs to one new pack during a snapshot.
type packWriter struct {
	s    *Store
	name string // final pack file name
	mu   sync.Mutex
	f    *os.File
	off  int64
	locs map[[32]byte]packLoc
	err  error
}

func (s *Store) newPackWriter() *packWriter {
	var r [8]byte
	rand.Read(r[:])
	return &packWriter{s: s, name: "pack-" + hex.EncodeToString(r[:]) + ".pack", locs: map[[32]byte]packLoc{}}
}

func (w *packWriter) tmpPath() string {
	return filepath.Join(w.s.dir, "packs", "tmp-"+w.name)
}

// add appends a blob (already in stored form) unless this pack has it.
func (w *packWriter) add(k [32]byte, blob []byte) (bool, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil {
		return false, w.err
	}
	if _, ok := w.locs[k]; ok {
		return false, nil
	}
	if w.f == nil {
		if w.f, w.err = os.OpenFile(w.tmpPath(), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o444); w.err != nil {
			return false, fmt.Errorf("object store: %w", w.err)
		}
	}
	if _, err := w.f.Write(blob); err != nil {
		w.err = fmt.Errorf("object store: write pack: %w", err)
		return false, w.err
	}
	w.locs[k] = packLoc{pack: w.name, offset: w.off, length: int64(len(blob))}
	w.off += int64(len(blob))
	return true, nil
}

// finish makes the pack visible (pack renamed first, then its index) and
// registers its blobs; with durable set, both files and the directory are
// fsynced first. An empty pack leaves nothing behind.
func (w *packWriter) finish(durable bool) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.f == nil {
		return w.err
	}
	f := w.f
	w.f = nil
	if w.err != nil {
		f.Close()
		os.Remove(w.tmpPath())
		return w.err
	}
	err := error(nil)
	if durable {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	packs := filepath.Join(w.s.dir, "packs")
	final := filepath.Join(packs, w.name)
	if err == nil {
		err = os.Rename(w.tmpPath(), final)
	}
	if err != nil {
		os.Remove(w.tmpPath())
		return fmt.Errorf("object store: finish pack: %w", err)
	}
	idx := encodeIndex(w.locs)
	idxPath := strings.TrimSuffix(final, ".pack") + ".idx"
	tmpIdx := idxPath + ".tmp"
	if err := os.WriteFile(tmpIdx, idx, 0o444); err != nil {
		return fmt.Errorf("object store: write pack index: %w", err)
	}
	if durable {
		if f, err := os.Open(tmpIdx); err == nil {
			err = f.Sync()
			f.Close()
			if err != nil {
				return fmt.Errorf("object store: fsync pack index: %w", err)
			}
		}
	}
	if err := os.Rename(tmpIdx, idxPath); err != nil {
		return fmt.Errorf("object store: install pack index: %w", err)
	}
	if durable {
		if d, err := os.Open(packs); err == nil {
			err = d.Sync()
			d.Close()
			if err != nil {
				return fmt.Errorf("object store: fsync %s: %w", packs, err)
			}
		}
	}
	w.s.mu.Lock()
	for k, l := range w.locs {
		w.s.index[k] = l
	}
	w.s.loaded[filepath.Base(idxPath)] = true
	w.s.mu.Unlock()
	return nil
}

// abort discards an unfinished pack.
func (w *packWriter) abort() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.f != nil {
		w.f.Close()
		w.f = nil
		os.Remove(w.tmpPath())
	}
}

func encodeIndex(locs map[[32]byte]packLoc) []byte {
	keys := make([][32]byte, 0, len(locs))
	for k := range locs {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return bytes.Compare(keys[i][:], keys[j][:]) < 0 })
	var b bytes.Buffer
	b.WriteString(idxMagic)
	var tmp [binary.MaxVarintLen64]byte
	b.Write(tmp[:binary.PutUvarint(tmp[:], uint64(len(keys)))])
	for _, k := range keys {
		l := locs[k]
		b.Write(k[:])
		b.Write(tmp[:binary.PutUvarint(tmp[:], uint64(l.offset))])
		b.Write(tmp[:binary.PutUvarint(tmp[:], uint64(l.length))])
	}
	return b.Bytes()
}

func decodeIndex(data []byte, pack string) (map[[32]byte]packLoc, error) {
	if !bytes.HasPrefix(data, []byte(idxMagic)) {
		return nil, errors.New("bad pack index header")
	}
	r := bytes.NewReader(data[len(idxMagic):])
	n, err := binary.ReadUvarint(r)
	if err != nil || n > uint64(len(data)) {
		return nil, errors.New("bad pack index count")
	}
	out := make(map[[32]byte]packLoc, n)
	for i := uint64(0); i < n; i++ {
		var k [32]byte
		if _, err := r.Read(k[:]); err != nil {
			return nil, errors.New("truncated pack index")
		}
		off, err1 := binary.ReadUvarint(r)
		ln, err2 := binary.ReadUvarint(r)
		if err1 != nil || err2 != nil {
			return nil, errors.New("truncated pack index")
		}
		out[k] = packLoc{pack: pack, offset: int64(off), length: int64(ln)}
	}
	return out, nil
}

// Prune deletes blobs that none of the given manifests refers to, and
// never a blob one of them refers to. Dead loose blobs are removed; a pack
// whose blobs are all dead is deleted; a pack with live blobs is rewritten
// with its live blobs only once its dead blobs make up at least half of its
// bytes. Below that its dead blobs stay until more of the pack dies: a
// snapshot of a large tree is one pack, and copying all of it whenever one
// file changes would cost more than the space it frees. Dead data in packs
// is so bounded by the live data. It returns the number of blobs removed.
//
// Call it only when no snapshot runs on this store and nobody reads a blob
// that is not kept.
func (s *Store) Prune(keep ...*Manifest) (removed int, err error) {
	live := map[[32]byte]bool{}
	for _, m := range keep {
		for _, e := range m.Files {
			if k, ok := parseSum(e.SHA256); ok {
				live[k] = true
			}
		}
	}
	// Loose blobs.
	dirs, err := os.ReadDir(s.dir)
	if err != nil {
		return 0, fmt.Errorf("prune object store: %w", err)
	}
	for _, d := range dirs {
		if !d.IsDir() || len(d.Name()) != 2 {
			continue
		}
		sub := filepath.Join(s.dir, d.Name())
		blobs, err := os.ReadDir(sub)
		if err != nil {
			return removed, fmt.Errorf("prune object store: %w", err)
		}
		for _, b := range blobs {
			if k, ok := parseSum(d.Name() + b.Name()); ok && live[k] {
				continue
			}
			if err := os.Remove(filepath.Join(sub, b.Name())); err != nil {
				return removed, fmt.Errorf("prune object store: %w", err)
			}
			removed++
		}
	}
	// Packs.
	packs := filepath.Join(s.dir, "packs")
	entries, err := os.ReadDir(packs)
	if err != nil {
		return removed, fmt.Errorf("prune object store: %w", err)
	}
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".idx") {
			continue
		}
		idxPath := filepath.Join(packs, e.Name())
		pack := strings.TrimSuffix(e.Name(), ".idx") + ".pack"
		data, err := os.ReadFile(idxPath)
		if err != nil {
			return removed, fmt.Errorf("prune object store: %w", err)
		}
		locs, err := decodeIndex(data, pack)
		if err != nil {
			return removed, fmt.Errorf("prune object store: %s: %w", idxPath, err)
		}
		dead := 0
		var deadBytes, total int64
		for k, l := range locs {
			total += l.length
			if !live[k] {
				dead++
				deadBytes += l.length
			}
		}
		if dead == 0 || (dead < len(locs) && deadBytes*2 < total) {
			continue
		}
		w := s.newPackWriter()
		for k, l := range locs {
			if !live[k] {
				continue
			}
			raw, err := readPacked(filepath.Join(packs, pack), l)
			if err == nil {
				_, err = w.add(k, raw)
			}
			if err != nil {
				w.abort()
				return removed, fmt.Errorf("prune object store: %w", err)
			}
		}
		if err := w.finish(true); err != nil {
			return removed, err
		}
		s.mu.Lock()
		for k, l := range locs {
			if cur, ok := s.index[k]; ok && cur.pack == l.pack {
				delete(s.index, k)
			}
		}
		for k, l := range w.locs {
			s.index[k] = l
		}
		s.mu.Unlock()
		if err := os.Remove(idxPath); err != nil {
			return removed, fmt.Errorf("prune object store: %w", err)
		}
		os.Remove(filepath.Join(packs, pack))
		removed += dead
	}
	return removed, nil
}
