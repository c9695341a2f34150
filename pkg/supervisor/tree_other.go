//go:build !linux

package supervisor

import (
	"errors"
	"os"
	"syscall"
)

// haveSubreaper: only Linux has PR_SET_CHILD_SUBREAPER; elsewhere the
// tree is the routine's process group (see tree).
const haveSubreaper = false

func makeSubreaper() error { return errors.New("no child subreaper on this system") }

func setParentDeathSignal(*syscall.SysProcAttr) {}

func (t *tree) descendants() []int { return nil }

func childrenOf(int) []int { return nil }

// selfExe is the running executable, started again as a supervisor.
func selfExe() string {
	exe, err := os.Executable()
	if err != nil {
		return os.Args[0]
	}
	return exe
}

// signalsBlocked: the mask is not looked at here; the routine inherits
// the one decree was started with.
func signalsBlocked() bool { return false }

func unblockSignals() {}

// signalsIgnored: ignored signals are not looked at here (see
// tree_linux.go); Go's own handling covers the usual ones.
func signalsIgnored() bool { return false }

func resetIgnoredSignals() {}
