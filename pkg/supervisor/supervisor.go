// Package supervisor fences one attempt: every routine, hook and router
// call runs under a small supervisor process of its own, which owns the
// attempt's whole process tree and ends it for certain. An attempt is
// over only when the supervisor says every process of it is gone.
//
// Why a separate process: a worker that is killed (SIGKILL, OOM) or
// stopped (SIGSTOP, a hung host) cannot run its own watchdog, and the
// parent-death signal reaches only a direct child, while a routine's
// descendants may leave its process group and session (setsid; a Jupyter
// kernel and its %%bash children do). So:
//
//   - The supervisor is this package's code in a process of its own:
//     cmd/decree-supervisor when it sits beside the running executable
//     and speaks the same Protocol (a small program, which starts in a
//     fraction of the time), else the worker's own binary started again.
//     Either way this package's init function recognises the environment
//     variable and runs the supervisor instead of the program, so
//     decreectl, decree-worker, driver plugins and test binaries all
//     carry it and need no separate executable.
//   - It is started when needed, one per routine, and starts the routine
//     at most once (see Start).
//   - On Linux it makes itself a child subreaper (PR_SET_CHILD_SUBREAPER):
//     every orphaned descendant, setsid or not, is reparented to it, so
//     walking /proc for processes whose parent chain leads to it finds the
//     whole tree. Elsewhere (macOS) the tree is the routine's process
//     group (see tree).
//   - It starts the routine in a process group of its own with the output
//     descriptors passed straight through (no extra copy of the output),
//     every signal at its default disposition, and it sits in its own
//     process group too, so a signal to the worker's group (Ctrl-C in a
//     terminal) reaches neither.
//   - It kills every descendant (SIGKILL, repeated until none is left)
//     when asked (Kill), when its control pipe from the worker reaches
//     end-of-file (the worker died), and when the lease deadline the
//     worker last gave it passes (the worker stopped renewing: it is
//     stopped, hung or cut off from the controller). Stop asks for SIGTERM
//     first and SIGKILL after a grace period; when the routine's main
//     process exits on its own, what it left behind gets the same.
//   - It reports the main process's wait status only after the last
//     descendant is gone, then exits. The output pipe therefore reaches
//     end-of-file when the attempt is over, and a handle's Wait returns
//     after that.
//
// Deadlines are absolute CLOCK_MONOTONIC times, which the worker and the
// supervisor share (same machine): a deadline computed from a heartbeat's
// send time stays correct however late the message is delivered, and is
// never later than the controller's own expiry of the lease.
package supervisor

import (
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// envKey marks a process started to be a supervisor.
const envKey = "DECREE_ATTEMPT_SUPERVISOR"

// Descriptor numbers in the supervisor: 3 is a pipe carrying the request
// (one JSON line) and then commands from the worker; 4 carries reports to
// it; 5, 6 and 7 are the routine's stdin, stdout and stderr, which the
// supervisor closes once the routine has them; 8, when the request says
// so, is the worker's process lock, held until the supervisor exits.
const (
	ctrlFD   = 3
	reportFD = 4
	stdinFD  = 5
	stdoutFD = 6
	stderrFD = 7
	holdFD   = 8
)

func init() {
	if os.Getenv(envUnblock) != "" {
		os.Exit(execUnblocked())
	}
	if os.Getenv(envKey) == "" {
		return
	}
	os.Exit(serve())
}

// monoNow is the current CLOCK_MONOTONIC time in nanoseconds.
func monoNow() int64 {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return ts.Nano()
}

// monoOf converts a wall-clock time with a monotonic reading to
// CLOCK_MONOTONIC nanoseconds.
func monoOf(t time.Time) int64 { return monoNow() + int64(time.Until(t)) }
