//go:build !linux

package store

import (
	"errors"
	"fmt"
)

// Without inotify (macOS and others) the inbox index compares the inbox
// directory's stamp on every use and reads its names when it changed
// (see watch_linux.go and index.go): the fallback Linux uses when it
// refuses a watch, and which its tests run with WatchInbox off.

// inboxWatch is never made here.
type inboxWatch struct{}

func newInboxWatch(_ *Store, dir string) (*inboxWatch, error) {
	return nil, fmt.Errorf("watch %s: %w", dir, errors.ErrUnsupported)
}

func (w *inboxWatch) close() {}

func (w *inboxWatch) drain(func(string)) bool { return false }
