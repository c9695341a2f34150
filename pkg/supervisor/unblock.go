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
