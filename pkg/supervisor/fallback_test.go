//go:build linux

package supervisor

import (
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/decreehq/decree/internal/testtool"
)

// inGroup is a routine whose background child stays in its process group
// and writes its pid, then a line every 20ms, into dir.
func inGroup(dir string) string {
	return fmt.Sprintf(`echo started
bash -c 'echo $$ > %[1]s/gc.pid.tmp; mv %[1]s/gc.pid.tmp %[1]s/gc.pid; while :; do echo tick >> %[1]s/ticks; sleep 0.02; done' &
wait`, dir)
}

// fallback runs the test with the portable process-group fallback (what
// macOS uses) on Linux.
func fallback(t *testing.T) {
	useFallback = true
	t.Cleanup(func() { useFallback = false })
}

// The fallback kills the routine's whole process group when asked, when
// the lease runs out and when the worker dies (TestStatusAfterLeftoversAreGone
// covers a main process that exits before its group).
func TestFallbackProcessGroup(t *testing.T) {
	t.Run("kill", func(t *testing.T) {
		fallback(t)
		dir := t.TempDir()
		p, _ := start(t, inGroup(dir), nil, time.Second)
		gc := grandchild(t, dir)
		p.Kill()
		if st, err := p.Wait(); err != nil || !st.Signaled() {
			t.Fatalf("status %v, %v; want killed", st, err)
		}
		if !gone(gc) {
			t.Fatalf("group member %d still runs after Wait", gc)
		}
		quiet(t, dir)
	})
	t.Run("lease", func(t *testing.T) {
		fallback(t)
		dir := t.TempDir()
		lease := NewLease(time.Now().Add(time.Second))
		stop := renewing(lease, time.Second) // until the group is up
		p, _ := start(t, inGroup(dir), &Fence{Lease: lease}, time.Second)
		gc := grandchild(t, dir)
		stop()
		select {
		case <-p.Done():
		case <-time.After(10 * time.Second):
			t.Fatal("the tree outlived its lease by 10s")
		}
		if !gone(gc) {
			t.Fatalf("group member %d survived the lease", gc)
		}
	})
	t.Run("worker death", func(t *testing.T) {
		dir := t.TempDir()
		cmd := exec.Command(os.Args[0])
		cmd.Env = append(os.Environ(), fallbackEnv+"=1")
		w := startHelper(t, cmd, inGroup(dir))
		gc := grandchild(t, dir)
		_ = w.Process.Signal(syscall.SIGKILL)
		testtool.WaitFor(t, 5*time.Second, "the group member to be killed", func() bool { return gone(gc) })
		quiet(t, dir)
	})
}
