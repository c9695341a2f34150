//go:build linux

package supervisor

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// haveSubreaper: Linux has PR_SET_CHILD_SUBREAPER (see tree).
const haveSubreaper = true

func makeSubreaper() error {
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("make the attempt supervisor a child subreaper: %w", err)
	}
	return nil
}

// setParentDeathSignal kills the routine's main process when the
// supervisor dies.
func setParentDeathSignal(a *syscall.SysProcAttr) { a.Pdeathsig = syscall.SIGKILL }

// selfExe starts the running executable again.
func selfExe() string { return "/proc/self/exe" }

// descendants lists the processes whose parent chain leads to the
// supervisor, following /proc/PID/task/TID/children from the supervisor
// down; when that finds none while children remain (the kernel's lists
// may miss a process being reparented), it scans all of /proc.
func (t *tree) descendants() []int {
	var out []int
	queue := []int{t.self}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, c := range childrenOf(p) {
			out = append(out, c)
			queue = append(queue, c)
		}
	}
	if len(out) == 0 {
		return t.scan()
	}
	return out
}

// childrenOf reads the children of every thread of pid.
func childrenOf(pid int) []int {
	dir := "/proc/" + strconv.Itoa(pid) + "/task"
	tasks, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var out []int
	for _, task := range tasks {
		b, err := os.ReadFile(dir + "/" + task.Name() + "/children")
		if err != nil {
			continue
		}
		for _, f := range strings.Fields(string(b)) {
			if c, err := strconv.Atoi(f); err == nil {
				out = append(out, c)
			}
		}
	}
	return out
}

// scan lists the live (not zombie) descendants from a walk of all of /proc.
func (t *tree) scan() []int {
	kids := map[int][]int{}
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		ppid, state, ok := procStat(pid)
		if !ok || state == 'Z' || state == 'X' {
			continue
		}
		kids[ppid] = append(kids[ppid], pid)
	}
	var out []int
	queue := []int{t.self}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, c := range kids[p] {
			out = append(out, c)
			queue = append(queue, c)
		}
	}
	return out
}

// procStat reads the parent pid and state of pid from /proc/PID/stat.
func procStat(pid int) (ppid int, state byte, ok bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, 0, false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')') // the command name may hold anything
	if i < 0 || i+2 >= len(s) {
		return 0, 0, false
	}
	f := strings.Fields(s[i+2:])
	if len(f) < 2 {
		return 0, 0, false
	}
	ppid, err = strconv.Atoi(f[1])
	return ppid, f[0][0], err == nil
}

// signalsBlocked reports whether this thread blocks any signal, which
// the routine would inherit.
func signalsBlocked() bool {
	var set unix.Sigset_t
	if err := unix.PthreadSigmask(unix.SIG_BLOCK, nil, &set); err != nil {
		return false
	}
	for _, w := range set.Val {
		if w != 0 {
			return true
		}
	}
	return false
}

// unblockSignals empties this thread's signal mask.
func unblockSignals() {
	var none unix.Sigset_t
	_ = unix.PthreadSigmask(unix.SIG_SETMASK, &none, nil)
}

// kernelSigaction is the kernel's struct sigaction as rt_sigaction(2)
// takes it on Linux (the layout the Go runtime uses on amd64 and arm64;
// only the handler, first everywhere, is read).
type kernelSigaction struct {
	handler  uintptr
	flags    uint64
	restorer uintptr
	mask     uint64
}

// sigIgn is SIG_IGN.
const sigIgn = 1

// ignoredBySystem calls fn for every signal this process ignores (SIG_IGN)
// and could catch. Go cannot take back some of them (the C library's
// real-time signals 32 and 33, which make(1) starts recipes with
// ignored), so they are read and reset with rt_sigaction directly.
func ignoredBySystem(fn func(sig int)) {
	for n := 1; n <= 64; n++ {
		if n == int(unix.SIGKILL) || n == int(unix.SIGSTOP) {
			continue
		}
		var old kernelSigaction
		if _, _, e := unix.RawSyscall6(unix.SYS_RT_SIGACTION, uintptr(n), 0, uintptr(unsafe.Pointer(&old)), 8, 0, 0); e != 0 {
			continue
		}
		if old.handler == sigIgn {
			fn(n)
		}
	}
}

// signalsIgnored reports whether any catchable signal is ignored, which
// the routine would inherit.
func signalsIgnored() bool {
	any := false
	ignoredBySystem(func(int) { any = true })
	return any
}

// resetIgnoredSignals sets every ignored signal back to its default, just
// before the exec of the routine (execUnblocked).
func resetIgnoredSignals() {
	ignoredBySystem(func(n int) {
		var dfl kernelSigaction // SIG_DFL
		_, _, _ = unix.RawSyscall6(unix.SYS_RT_SIGACTION, uintptr(n), uintptr(unsafe.Pointer(&dfl)), 0, 8, 0, 0)
	})
}
