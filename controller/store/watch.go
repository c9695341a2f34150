//go:build linux

package store

import (
	"errors"
	"fmt"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Change notification for the inbox index.
//
// With Options.WatchInbox the store asks the kernel (inotify) to report
// every name created, removed, renamed, written or touched in inbox/. The
// queue of reports is read without blocking whenever the index is used, so
// an unchanged inbox costs one read(2) that finds nothing, and a change
// costs one lstat per name it touched, however many messages are queued:
// neither the directory nor the queued files are read again. A queue
// overflow, or the inbox directory itself being removed or replaced, makes
// the next listing a full one under a new watch.
//
// Without a watch (not asked for, or the system refuses one: inotify
// instances are limited per user) the index falls back to comparing the
// inbox directory's stamp and reading its names when it changed (see
// index.go). The full check every RescanInterval per thousand queued stays
// in both modes, as a safety net for file systems that do not report every
// change (network file systems changed from another machine).

// watchMask is what the inbox watch reports.
const watchMask = unix.IN_CREATE | unix.IN_DELETE | unix.IN_MOVED_FROM | unix.IN_MOVED_TO |
	unix.IN_CLOSE_WRITE | unix.IN_MODIFY | unix.IN_ATTRIB |
	unix.IN_DELETE_SELF | unix.IN_MOVE_SELF | unix.IN_ONLYDIR

// inboxWatch is an inotify instance watching one directory, read without
// blocking. s.mu guards it.
type inboxWatch struct {
	fd      *int // shared with the clean-up, which closes it if Close never ran
	buf     []byte
	cleanup runtime.Cleanup
}

// newInboxWatch watches dir.
func newInboxWatch(owner *Store, dir string) (*inboxWatch, error) {
	fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("watch %s: inotify_init1: %w", dir, err)
	}
	if _, err := unix.InotifyAddWatch(fd, dir, watchMask); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("watch %s: %w", dir, err)
	}
	p := new(int)
	*p = fd
	w := &inboxWatch{fd: p, buf: make([]byte, 64<<10)}
	// A store dropped without Close gives its inotify instance back when
	// it is collected.
	w.cleanup = runtime.AddCleanup(owner, func(fd *int) {
		if *fd >= 0 {
			unix.Close(*fd)
		}
	}, p)
	return w, nil
}

// close releases the inotify instance.
func (w *inboxWatch) close() {
	w.cleanup.Stop()
	if *w.fd >= 0 {
		unix.Close(*w.fd)
		*w.fd = -1
	}
}

// drain reads every pending report and calls changed once per report with
// the name it concerns. It returns false when the reports cannot be
// trusted to be complete (the kernel's queue overflowed, the directory
// was removed or moved, or reading failed): the caller lists the inbox in
// full under a new watch.
func (w *inboxWatch) drain(changed func(name string)) bool {
	complete := true
	for {
		n, err := unix.Read(*w.fd, w.buf)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if errors.Is(err, unix.EAGAIN) {
			return complete
		}
		if err != nil || n <= 0 {
			return false
		}
		for off := 0; off+unix.SizeofInotifyEvent <= n; {
			ev := (*unix.InotifyEvent)(unsafe.Pointer(&w.buf[off]))
			nameLen := int(ev.Len)
			end := off + unix.SizeofInotifyEvent + nameLen
			if end > n {
				return false
			}
			if ev.Mask&(unix.IN_Q_OVERFLOW|unix.IN_IGNORED|unix.IN_DELETE_SELF|unix.IN_MOVE_SELF|unix.IN_UNMOUNT) != 0 {
				complete = false
			} else if nameLen > 0 {
				name := w.buf[off+unix.SizeofInotifyEvent : end]
				for i, c := range name {
					if c == 0 {
						name = name[:i]
						break
					}
				}
				changed(string(name))
			}
			off = end
		}
	}
}
