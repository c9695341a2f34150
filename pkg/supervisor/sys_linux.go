package supervisor

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// recvmsgCloexec receives descriptors close-on-exec.
const recvmsgCloexec = unix.MSG_CMSG_CLOEXEC

// socketpairCloexec is a connected unix stream pair, close-on-exec.
func socketpairCloexec() ([2]int, error) {
	return unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
}

// becomeSubreaper makes this process the reaper of every descendant that
// loses its parent, so no process of the attempt escapes it.
func becomeSubreaper() error { return unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) }

// routineSysProcAttr starts the routine in its own process group, killed
// when the supervisor's thread dies.
func routineSysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
