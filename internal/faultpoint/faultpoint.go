// Package faultpoint lets the fault tests kill a process at an exact point
// of its work, with a real SIGKILL: a process started with
// DECREE_FAULT=<name> kills itself when it reaches the point of that name
// (Hit). Points are named after what has just happened ("merge-journaled",
// "merge-half-applied"). Nothing happens without the variable.
package faultpoint

import (
	"os"
	"syscall"
	"time"
)

// Env is the variable naming the point at which to die.
const Env = "DECREE_FAULT"

// Hit kills the process with SIGKILL when DECREE_FAULT names point.
func Hit(point string) {
	if Active(point) {
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {} // the signal is on its way
	}
}

// HitAfter kills the process d after it reached point, when DECREE_FAULT
// names point; the caller's goroutine waits until then, the rest of the
// process goes on (a kill in a background step after the foreground work
// that follows it).
func HitAfter(point string, d time.Duration) {
	if Active(point) {
		time.Sleep(d)
		Hit(point)
	}
}

// Active reports whether DECREE_FAULT names point.
func Active(point string) bool {
	return point != "" && os.Getenv(Env) == point
}
