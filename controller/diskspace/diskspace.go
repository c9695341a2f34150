// Package diskspace watches the free space of the file system that holds a
// project, so that a full disk pauses processing loudly instead of stalling
// it in silence, and processing resumes by itself once space is freed.
//
// A Monitor compares the space available to the controller (statfs's
// f_bavail, what an unprivileged writer can use) with a minimum. Check
// reports the state and whether it changed since the last call, so the
// caller logs, emits an event and shows the condition in status exactly
// once per change. Errors that say the disk is full (ENOSPC, EDQUOT) are
// recognised by IsNoSpace, so work that failed for that reason is kept and
// retried rather than dead-lettered.
package diskspace

import (
	"errors"
	"fmt"
	"sync"
	"syscall"
	"time"
)

// DefaultMinFree is the free space below which processing pauses: enough
// for run records, manifests and the diffs of a typical attempt.
const DefaultMinFree = 64 << 20

// Options configure a Monitor.
type Options struct {
	// MinFree is the space that must stay available (DefaultMinFree when
	// zero).
	MinFree uint64
	// Free returns the bytes available on the file system holding dir;
	// nil means statfs(2). Tests inject faults through it.
	Free func(dir string) (uint64, error)
	// Now is the clock (time.Now when nil).
	Now func() time.Time
}

// State is what a Check found.
type State struct {
	// Full is set while less than MinFree is available.
	Full bool
	// Free and MinFree are in bytes.
	Free, MinFree uint64
	// Since is when the current state began.
	Since time.Time
	// Dir is the directory watched.
	Dir string
	// Err is set when the free space could not be read (Full is then
	// left as it was).
	Err error
}

// String describes a full disk for people, "" when the disk is not full.
func (s State) String() string {
	if !s.Full {
		return ""
	}
	return fmt.Sprintf("the disk holding %s is full: %s available, at least %s needed; processing is paused since %s and resumes by itself once space is freed",
		s.Dir, Bytes(s.Free), Bytes(s.MinFree), s.Since.Format(time.RFC3339))
}

// Monitor watches one directory's file system. It is safe for concurrent
// use.
type Monitor struct {
	dir  string
	opts Options

	mu    sync.Mutex
	state State
	// marked is set by MarkFull: a write failed for want of space although
	// the space looked sufficient (a quota, or reserved blocks). The disk
	// then counts as full until more space than markedFree is available.
	marked     bool
	markedFree uint64
}

// New returns a monitor of dir's file system.
func New(dir string, opts Options) *Monitor {
	if opts.MinFree == 0 {
		opts.MinFree = DefaultMinFree
	}
	if opts.Free == nil {
		opts.Free = statfsFree
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Monitor{dir: dir, opts: opts, state: State{Dir: dir, MinFree: opts.MinFree, Since: opts.Now()}}
}

// Check reads the free space now and returns the state, and whether Full
// changed since the previous Check.
func (m *Monitor) Check() (State, bool) {
	free, err := m.opts.Free(m.dir)
	m.mu.Lock()
	defer m.mu.Unlock()
	if err != nil {
		m.state.Err = fmt.Errorf("read the free space of %s: %w", m.dir, err)
		return m.state, false
	}
	m.state.Err = nil
	m.state.Free = free
	full := free < m.opts.MinFree || (m.marked && free <= m.markedFree)
	if !full {
		m.marked = false
	}
	changed := full != m.state.Full
	if changed {
		m.state.Full = full
		m.state.Since = m.opts.Now()
	}
	return m.state, changed
}

// MarkFull records that a write failed for want of space, so the state is
// full until a Check finds enough space again. It reports whether the
// state changed.
func (m *Monitor) MarkFull() (State, bool) {
	free, err := m.opts.Free(m.dir)
	m.mu.Lock()
	defer m.mu.Unlock()
	if err == nil {
		m.state.Free = free
		m.marked, m.markedFree = true, free
	}
	if m.state.Full {
		return m.state, false
	}
	m.state.Full = true
	m.state.Since = m.opts.Now()
	return m.state, true
}

// State returns the state found by the last Check.
func (m *Monitor) State() State {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.state
}

// IsNoSpace reports whether err says the disk (or the user's quota) is
// full.
func IsNoSpace(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT)
}

func statfsFree(dir string) (uint64, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, err
	}
	return st.Bavail * uint64(st.Bsize), nil
}

// Bytes formats a byte count for people (e.g. "12.5 MiB").
func Bytes(n uint64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := uint64(unit), 0
	for v := n / unit; v >= unit; v /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
