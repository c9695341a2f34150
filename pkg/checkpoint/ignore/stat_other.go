//go:build !linux

package ignore

import (
	"io/fs"
	"os"
	"path/filepath"
)

type dirHandle struct{ path string }

type dirEntry struct {
	name string
	rel  string // prefix + name
	typ  fs.FileMode
}

const modeUnknown = fs.ModeIrregular

// scratch is memory one walker reuses from directory to directory.
type scratch struct{}

func openDir(path string, _ *scratch) (*dirHandle, error) {
	if _, err := os.Stat(path); err != nil {
		return nil, err
	}
	return &dirHandle{path: path}, nil
}

func (d *dirHandle) close() {}

func (d *dirHandle) entries(prefix string) ([]dirEntry, error) {
	list, err := os.ReadDir(d.path)
	if err != nil {
		return nil, err
	}
	out := make([]dirEntry, len(list))
	for i, e := range list {
		out[i] = dirEntry{name: e.Name(), rel: prefix + e.Name(), typ: e.Type()}
	}
	return out, nil
}

func (d *dirHandle) lstat(name string) (fs.FileInfo, error) {
	return os.Lstat(filepath.Join(d.path, name))
}
