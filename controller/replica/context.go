package replica

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/decreehq/decree/pkg/checkpoint"
	"github.com/decreehq/decree/pkg/fsutil"
	"github.com/decreehq/decree/pkg/wiremanifest"
)

// maxContextFile bounds one read-only context file sent to replicas.
const maxContextFile = 16 << 20

// ctxFile is one read-only context file as last read, with the stat data
// that lets the next Publish trust it without reading it again.
type ctxFile struct {
	entry checkpoint.Entry
	key   ctxKey
	// racy: read less than racyWindow after it was last changed, so the
	// same stat data could hide a later write: read again next time.
	racy bool
}

type ctxKey struct {
	size, mtime, ctime int64
	ino                uint64
	mode               fs.FileMode
}

func ctxKeyOf(fi fs.FileInfo) ctxKey {
	k := ctxKey{size: fi.Size(), mtime: fi.ModTime().UnixNano(), mode: fi.Mode()}
	k.ctime, k.ino, _ = fsutil.StatCtimeIno(fi)
	return k
}

// racyWindow is the racily-clean margin (as the checkpoint's): a file
// read within it of its last change is read again at the next Publish.
const racyWindow = 2 * time.Second

// contextFiles returns the read-only context files under .decree/ (specs,
// prompts, routines, router guide, configuration, processed.md; see
// wiremanifest.IsContextPath), storing their contents in the object store
// so they can be served. Symlinks and files over 16 MiB there are left
// out. A file whose stat data is what prev recorded (and not racily
// clean) is not read again: a Publish costs one lstat per context file.
func (s *Service) contextFiles(prev map[string]ctxFile) (map[string]ctxFile, error) {
	out := make(map[string]ctxFile, len(prev))
	add := func(abs string, d fs.DirEntry) error {
		if !d.Type().IsRegular() {
			return nil
		}
		rel, err := filepath.Rel(s.opts.Root, abs)
		if err != nil {
			return nil
		}
		rel = filepath.ToSlash(rel)
		if !wiremanifest.IsContextPath(rel) || fsutil.CheckRelPath(rel) != nil {
			return nil
		}
		fi, err := d.Info()
		if err != nil || fi.Size() > maxContextFile {
			return nil
		}
		key := ctxKeyOf(fi)
		if old, ok := prev[rel]; ok && !old.racy && old.key == key && (old.entry.Size == 0 || s.opts.Objects.Has(old.entry.SHA256)) {
			out[rel] = old
			return nil
		}
		readAt := time.Now()
		data, err := os.ReadFile(abs)
		if err != nil {
			return fmt.Errorf("read %s for replica workers: %w", rel, err)
		}
		sum := sha256.Sum256(data)
		hexSum := hex.EncodeToString(sum[:])
		if len(data) > 0 {
			if err := s.opts.Objects.Put(hexSum, data); err != nil {
				return err
			}
		}
		last := max(key.mtime, key.ctime)
		out[rel] = ctxFile{
			entry: checkpoint.Entry{SHA256: hexSum, Size: int64(len(data)), Mode: checkpoint.ModeOf(fi.Mode())},
			// The key must describe what was read: a file that changed
			// size meanwhile is read again next time.
			key:  key,
			racy: int64(len(data)) != key.size || readAt.UnixNano()-last < int64(racyWindow),
		}
		return nil
	}
	for _, dir := range wiremanifest.ContextDirs() {
		err := filepath.WalkDir(filepath.Join(s.opts.Root, filepath.FromSlash(dir)), func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				if errors.Is(err, fs.ErrNotExist) {
					return nil
				}
				return err
			}
			return add(p, d)
		})
		if err != nil {
			return nil, err
		}
	}
	for _, f := range wiremanifest.ContextFiles() {
		abs := filepath.Join(s.opts.Root, filepath.FromSlash(f))
		fi, err := os.Lstat(abs)
		if err != nil {
			continue
		}
		if err := add(abs, fs.FileInfoToDirEntry(fi)); err != nil {
			return nil, err
		}
	}
	return out, nil
}
