package supervisor

import (
	"os"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// tree is the supervised process tree. Where the kernel offers a child
// subreaper (Linux), the supervisor is one: every descendant, also one
// that left the routine's process group and session, is reparented to it
// and found from it. Elsewhere (macOS), or when the request asks for the
// fallback, the tree is the routine's process group: signals go to the
// group, the tree is gone when the group is, and a descendant that left
// the group (setsid) is not seen. There the routine has no parent-death
// signal either; the supervisor kills the group when the worker's
// control pipe reaches end-of-file, as everywhere.
type tree struct {
	self, main int
	mainDone   bool
	status     syscall.WaitStatus
	// group selects the process-group fallback.
	group bool
	// termed holds the processes sent SIGTERM since the tree began to
	// terminate (see termOrphans).
	termed map[int]bool
}

func newTree(fallback bool) *tree {
	return &tree{self: os.Getpid(), group: fallback || !haveSubreaper}
}

// prepare makes the supervisor a child subreaper unless it uses the
// process-group fallback.
func (t *tree) prepare() error {
	if t.group {
		return nil
	}
	return makeSubreaper()
}

// procAttr is how the routine's main process is started: in a process
// group of its own, killed when the supervisor dies where the kernel
// offers that.
func (t *tree) procAttr() *syscall.SysProcAttr {
	a := &syscall.SysProcAttr{Setpgid: true}
	if !t.group {
		setParentDeathSignal(a)
	}
	return a
}

// killAll kills every descendant until none is left, reaps the main
// process and returns its status.
func (t *tree) killAll() syscall.WaitStatus {
	for {
		if !t.reap() {
			return t.status
		}
		if t.group {
			_ = unix.Kill(-t.main, unix.SIGKILL)
		} else {
			for _, pid := range t.descendants() {
				_ = unix.Kill(pid, unix.SIGKILL)
			}
		}
		time.Sleep(time.Millisecond)
	}
}

// signalAll sends sig to the routine's process group and to every
// descendant (some may have left the group). The descendants are listed
// before the group is signalled: a process that dies hands its children
// to the supervisor, and a listing taken while that happens misses them
// (a detached child of a main process killed by the group signal then
// got no SIGTERM and lived until the grace ran out).
func (t *tree) signalAll(sig syscall.Signal) {
	var pids []int
	if !t.group {
		pids = t.descendants()
	}
	_ = unix.Kill(-t.main, sig)
	for _, pid := range pids {
		_ = unix.Kill(pid, sig)
		t.signalled(pid)
	}
}

// signalled notes that pid got the termination signal.
func (t *tree) signalled(pid int) {
	if t.termed == nil {
		t.termed = map[int]bool{}
	}
	t.termed[pid] = true
}

// termOrphans sends SIGTERM, once, to every child of the supervisor that
// has not had it: a process of the tree whose parent died since the
// first round (it was handed to the supervisor), be it one that round
// missed or one a dying process's cleanup left behind. A process started
// by a cleanup handler is left alone while that handler's process lives.
// It runs on every poll while the tree is terminated; nothing to do in
// the process-group fallback, where the group signal reaches every
// process that can be seen.
func (t *tree) termOrphans() {
	if t.group {
		return
	}
	for _, pid := range childrenOf(t.self) {
		if pid != t.main && !t.termed[pid] {
			_ = unix.Kill(pid, unix.SIGTERM)
			t.signalled(pid)
		}
	}
}

// reap collects every exited child, noting the main process's status,
// and reports whether any process of the tree remains. As a subreaper,
// every live descendant has a live parent chain up to the supervisor: no
// child left means no descendant left, which the kernel tells exactly
// (ECHILD), without a look at /proc. In the fallback, the tree remains
// while the routine's process group has a member.
func (t *tree) reap() (remain bool) {
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		switch {
		case err == syscall.EINTR:
			continue
		case err != nil: // ECHILD
			return t.group && t.main > 0 && unix.Kill(-t.main, 0) == nil
		case pid == 0:
			return true
		case pid == t.main:
			t.mainDone, t.status = true, ws
		}
	}
}

// reapAll waits for every remaining child (all are dead or dying) until
// none is left, so that no zombie of the tree outlives the report.
func (t *tree) reapAll() {
	for {
		var ws syscall.WaitStatus
		_, err := syscall.Wait4(-1, &ws, 0, nil)
		if err == syscall.EINTR {
			continue
		}
		if err != nil { // ECHILD: none left
			return
		}
	}
}
