package treewatch

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The events that can change what a snapshot records. IN_EXCL_UNLINK
// drops events of files already unlinked; IN_ONLYDIR and IN_DONT_FOLLOW
// make sure a watch is put on a real directory, never through a symlink.
const watchMask = unix.IN_CREATE | unix.IN_DELETE | unix.IN_MODIFY | unix.IN_ATTRIB | unix.IN_CLOSE_WRITE |
	unix.IN_MOVED_FROM | unix.IN_MOVED_TO | unix.IN_DELETE_SELF | unix.IN_MOVE_SELF |
	unix.IN_ONLYDIR | unix.IN_DONT_FOLLOW | unix.IN_EXCL_UNLINK

// Watcher watches directories of one tree with inotify. It is safe for
// concurrent use.
type Watcher struct {
	root string
	fd   int

	mu       sync.Mutex
	byWd     map[int32]string // watch descriptor -> directory (relative)
	byDir    map[string]int32
	overflow bool // set by tests: the next Drain reports an overflow
	buf      []byte
	max      int
}

// network and FUSE file systems: their changes made elsewhere raise no
// inotify event, so they are walked.
var unwatchable = map[int64]string{
	0x6969:     "nfs",
	0x517b:     "smb",
	0xff534d42: "cifs",
	0xfe534d42: "smb2",
	0x65735546: "fuse",
	0x01021997: "9p",
	0x00c36400: "ceph",
	0x5346414f: "afs",
	0x47504653: "gpfs",
	0x0bd00bd0: "lustre",
}

// New returns a Watcher for the tree at root (absolute). No directory is
// watched until Add.
func New(root string, opts Options) (*Watcher, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(root, &st); err != nil {
		return nil, fmt.Errorf("treewatch: %s: %w", root, err)
	}
	if name, ok := unwatchable[int64(st.Type)&0xffffffff]; ok {
		return nil, fmt.Errorf("%w (%s is on %s)", ErrUnsupported, root, name)
	}
	fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		if err == unix.EMFILE {
			return nil, fmt.Errorf("%w: inotify instances: %v (raise fs.inotify.max_user_instances)", ErrLimit, err)
		}
		return nil, fmt.Errorf("treewatch: inotify_init1: %w", err)
	}
	return &Watcher{root: root, fd: fd, byWd: map[int32]string{}, byDir: map[string]int32{}, buf: make([]byte, 64<<10), max: opts.MaxWatches}, nil
}

// Add watches the directory dir (relative, slash-separated, "" for the
// root). Adding a directory again (or the same directory under a new name
// after a rename) is fine.
func (w *Watcher) Add(dir string) error {
	if w.max > 0 {
		w.mu.Lock()
		full := len(w.byDir) >= w.max && w.byDir[dir] == 0
		w.mu.Unlock()
		if full {
			return fmt.Errorf("%w (Options.MaxWatches is %d)", ErrLimit, w.max)
		}
	}
	abs := filepath.Join(w.root, filepath.FromSlash(dir))
	wd, err := unix.InotifyAddWatch(w.fd, abs, watchMask)
	if err != nil {
		if err == unix.ENOSPC {
			return ErrLimit
		}
		return fmt.Errorf("treewatch: watch %s: %w", abs, err)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if old, ok := w.byWd[int32(wd)]; ok && old != dir && w.byDir[old] == int32(wd) {
		delete(w.byDir, old) // the same directory, renamed
	}
	w.byWd[int32(wd)] = dir
	w.byDir[dir] = int32(wd)
	return nil
}

// Remove stops watching dir and every watched directory below it, except
// those whose watch now serves another path (a directory renamed within
// the tree and added again under its new name).
func (w *Watcher) Remove(dir string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	prefix := dir + "/"
	for d, wd := range w.byDir {
		if d != dir && (dir != "" && !strings.HasPrefix(d, prefix)) {
			continue
		}
		delete(w.byDir, d)
		if w.byWd[wd] == d {
			delete(w.byWd, wd)
			_, _ = unix.InotifyRmWatch(w.fd, uint32(wd))
		}
	}
}

// Watched returns the number of directories watched.
func (w *Watcher) Watched() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.byDir)
}

// Drain reads every queued event without blocking.
func (w *Watcher) Drain() (Changes, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	var ch Changes
	seen := map[string]struct{}{}
	if w.overflow {
		w.overflow = false
		ch.Overflow = true
	}
	for {
		n, err := unix.Read(w.fd, w.buf)
		if err == unix.EINTR {
			continue
		}
		if err == unix.EAGAIN || n == 0 {
			break
		}
		if err != nil {
			return ch, fmt.Errorf("treewatch: read events: %w", err)
		}
		for b := w.buf[:n]; len(b) >= unix.SizeofInotifyEvent; {
			ev := (*unix.InotifyEvent)(unsafe.Pointer(&b[0]))
			end := unix.SizeofInotifyEvent + int(ev.Len)
			if end > len(b) {
				return ch, errors.New("treewatch: short inotify event")
			}
			name := b[unix.SizeofInotifyEvent:end]
			for i, c := range name {
				if c == 0 {
					name = name[:i]
					break
				}
			}
			b = b[end:]
			switch {
			case ev.Mask&unix.IN_Q_OVERFLOW != 0:
				ch.Overflow = true
				continue
			case ev.Mask&unix.IN_IGNORED != 0:
				if d, ok := w.byWd[ev.Wd]; ok {
					delete(w.byWd, ev.Wd)
					if w.byDir[d] == ev.Wd {
						delete(w.byDir, d)
					}
				}
				continue
			}
			dir, ok := w.byWd[ev.Wd]
			if !ok {
				continue // a watch removed since
			}
			if ev.Mask&(unix.IN_DELETE_SELF|unix.IN_MOVE_SELF) != 0 {
				// A directory's own move or deletion is also reported
				// in its parent, by name; the root's is not.
				if dir == "" {
					ch.Overflow = true
				}
				continue
			}
			if len(name) == 0 {
				continue
			}
			p := string(name)
			if dir != "" {
				p = dir + "/" + p
			}
			if _, dup := seen[p]; !dup {
				seen[p] = struct{}{}
				ch.Paths = append(ch.Paths, p)
			}
		}
	}
	return ch, nil
}

// SimulateOverflow makes the next Drain report an overflow, as when the
// kernel drops events (for tests of the callers' fallback).
func (w *Watcher) SimulateOverflow() {
	w.mu.Lock()
	w.overflow = true
	w.mu.Unlock()
}

// Close releases the watches.
func (w *Watcher) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.fd < 0 {
		return nil
	}
	err := unix.Close(w.fd)
	w.fd = -1
	return err
}
