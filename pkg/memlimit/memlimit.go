// Package memlimit gives decree's programs a soft memory limit, so that the
// garbage of large transient buffers (a message body decoded, copied and
// written) is collected before the heap doubles, instead of when it has.
//
// Decree's data paths stream large files (diffs, reverts, blobs, logs), so
// the live heap stays small; the limit keeps garbage from pushing the
// resident size far above it. It is soft: a program whose live data
// exceeds it keeps running (the Go runtime caps the extra collection work
// at about half the CPU), so it never fails for it. GOMEMLIMIT, when set,
// wins.
package memlimit

import (
	"os"
	"runtime/debug"
)

// Default is the soft limit applied when GOMEMLIMIT is not set: the issue
// #12 goal for controller, worker and decreectl resident memory, less room
// for what the runtime does not count (stacks, the binary's own pages).
const Default = 80 << 20

// Apply sets the soft memory limit to Default unless GOMEMLIMIT is set.
// It returns the limit in force.
func Apply() int64 {
	if os.Getenv("GOMEMLIMIT") != "" {
		return debug.SetMemoryLimit(-1)
	}
	debug.SetMemoryLimit(Default)
	return Default
}
