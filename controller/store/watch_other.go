//go:build !linux

package store

import (
	"errors"
	"fmt"
)

// Without inotify (systems other than Linux) the inbox is never watched:
// newInboxWatch fails, and the index compares the inbox directory's stamp
// on every use instead (see watch.go and index.go).

type inboxWatch struct{}

var errNoInotify = errors.New("inotify is Linux-only")

func newInboxWatch(_ *Store, dir string) (*inboxWatch, error) {
	return nil, fmt.Errorf("watch %s: %w; the inbox is checked by listing", dir, errNoInotify)
}

func (w *inboxWatch) close() {}

func (w *inboxWatch) drain(func(name string)) bool { return false }
