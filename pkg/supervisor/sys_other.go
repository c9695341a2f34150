//go:build !linux

package supervisor

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// Outside Linux there is no child subreaper and no parent-death signal:
// the supervisor still owns the routine's process group and kills it when
// asked, when its worker goes away or its lease deadline passes, but a
// descendant that leaves the group (setsid) is not followed. These builds
// let decree compile and run there; Linux is where it is tested.

// recvmsgCloexec is 0: readRequest marks received descriptors
// close-on-exec itself.
const recvmsgCloexec = 0

// socketpairCloexec is a connected unix stream pair, close-on-exec.
func socketpairCloexec() ([2]int, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM, 0)
	if err == nil {
		unix.CloseOnExec(fds[0])
		unix.CloseOnExec(fds[1])
	}
	return fds, err
}

// becomeSubreaper does nothing: there is no subreaper here.
func becomeSubreaper() error { return nil }

// routineSysProcAttr starts the routine in its own process group.
func routineSysProcAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }
