//go:build !linux

package treewatch

// Watcher is not available on this system: New always fails with
// ErrUnsupported and the caller walks the tree.
type Watcher struct{}

// New returns ErrUnsupported: only Linux (inotify) is supported. macOS's
// FSEvents would need cgo.
func New(root string, opts Options) (*Watcher, error) { return nil, ErrUnsupported }

// Add is never reached (New fails).
func (w *Watcher) Add(dir string) error { return ErrUnsupported }

// Remove is never reached (New fails).
func (w *Watcher) Remove(dir string) {}

// Watched is never reached (New fails).
func (w *Watcher) Watched() int { return 0 }

// Drain reports an overflow: walk the tree.
func (w *Watcher) Drain() (Changes, error) { return Changes{Overflow: true}, nil }

// SimulateOverflow is never reached (New fails).
func (w *Watcher) SimulateOverflow() {}

// Close is never reached (New fails).
func (w *Watcher) Close() error { return nil }
