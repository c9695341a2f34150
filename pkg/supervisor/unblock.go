package supervisor

import (
	"fmt"
	"os"
	"runtime"
	"slices"
	"strings"
	"syscall"
)

// envUnblock marks a process started only to clear its signal mask and
// exec the routine (argv: name, path, the routine's argv).
const envUnblock = "DECREE_EXEC_UNBLOCKED"

// execUnblocked empties this thread's signal mask, takes back every
// signal still ignored, and execs the routine with its environment less
// the marker; it returns only on failure. Needed when decree was started
// with signals blocked, or ignored beyond what Go takes over (make(1)
// starts its recipes with the C library's real-time signals 32 and 33
// ignored): the Go runtime gives every child it forks the mask the program
// started with, and exec keeps ignored signals ignored.
func execUnblocked() int {
	runtime.LockOSThread()
	if len(os.Args) < 3 {
		fmt.Fprintln(os.Stderr, "decree: nothing to run")
		return 127
	}
	unblockSignals()
	resetIgnoredSignals()
	env := slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, envUnblock+"=") })
	err := syscall.Exec(os.Args[1], os.Args[2:], env)
	fmt.Fprintf(os.Stderr, "decree: start %s: %v\n", os.Args[1], err)
	return 127
}

// lastWins drops earlier entries of a key that appears again in env (the
// routine's settings come after what the worker inherited). Programs
// disagree on duplicates: bash takes the last, Go's runtime (the exec
// step above) the first; without duplicates every routine sees the same.
func lastWins(env []string) []string {
	last := make(map[string]int, len(env))
	for i, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		last[k] = i
	}
	out := make([]string, 0, len(last))
	for i, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		if last[k] == i {
			out = append(out, kv)
		}
	}
	return out
}
