package replica

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/decreehq/decree/pkg/checkpoint"
	"github.com/decreehq/decree/pkg/fsutil"
	"github.com/decreehq/decree/pkg/wiremanifest"
)

// maxContextFile bounds one read-only context file sent to replicas.
const maxContextFile = 16 << 20

// withContext returns tree plus the read-only context files under .decree/
// (specs, prompts, routines, router guide, configuration, processed.md;
// see wiremanifest.IsContextPath), storing their contents in the object
// store so they can be served. Symlinks and files over 16 MiB there are
// left out.
func (s *Service) withContext(tree *checkpoint.Manifest) (*checkpoint.Manifest, error) {
	out := &checkpoint.Manifest{Files: make(map[string]checkpoint.Entry, len(tree.Files)+16)}
	for p, e := range tree.Files {
		out.Files[p] = e
	}
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
		out.Files[rel] = checkpoint.Entry{SHA256: hexSum, Size: int64(len(data)), Mode: checkpoint.ModeOf(fi.Mode())}
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
