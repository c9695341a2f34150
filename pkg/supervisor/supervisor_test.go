//go:build linux

package supervisor

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/decreehq/decree/internal/testtool"
)

// helperEnv makes the test binary act as a worker that supervises one
// routine (helperWorker), so tests can kill -9 or SIGSTOP that worker.
const helperEnv = "SUPERVISOR_TEST_WORKER"

// fallbackEnv makes that worker use the process-group fallback.
const fallbackEnv = "SUPERVISOR_TEST_FALLBACK"

func TestMain(m *testing.M) {
	if script := os.Getenv(helperEnv); script != "" {
		helperWorker(script)
		return
	}
	os.Exit(m.Run())
}

// helperTTL is the helper worker's lease: long enough that its renewals
// (every quarter) keep it on a loaded machine.
const helperTTL = time.Second

// helperWorker supervises `bash -c script` under a lease of helperTTL that
// it renews, prints "ready" and waits forever.
func helperWorker(script string) {
	useFallback = os.Getenv(fallbackEnv) != ""
	lease := NewLease(time.Now().Add(helperTTL))
	renewing(lease, helperTTL) // from before the start: it may be slow under load
	p, err := Start(Spec{Path: "/bin/bash", Args: []string{"-c", script}, Env: os.Environ(), Grace: time.Second, Fence: &Fence{Lease: lease}})
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	fmt.Println("ready", p.Pid())
	select {}
}

// detached is a routine whose background child leaves the session
// (setsid) and writes its pid, then a line every 20ms, into dir.
func detached(dir string) string {
	return fmt.Sprintf(`echo started
setsid bash -c 'echo $$ > %[1]s/gc.pid.tmp; mv %[1]s/gc.pid.tmp %[1]s/gc.pid; while :; do echo tick >> %[1]s/ticks; sleep 0.02; done' &
wait`, dir)
}

// grandchild waits for the detached child's pid.
func grandchild(t *testing.T, dir string) int {
	t.Helper()
	var pid int
	testtool.WaitFor(t, 10*time.Second, "the detached child's pid", func() bool {
		b, err := os.ReadFile(filepath.Join(dir, "gc.pid"))
		if err != nil {
			return false
		}
		pid, err = strconv.Atoi(strings.TrimSpace(string(b)))
		return err == nil && pid > 0
	})
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
	return pid
}

// gone reports whether pid no longer runs (absent or a zombie).
func gone(pid int) bool {
	_, state, ok := procStat(pid)
	return !ok || state == 'Z'
}

// quiet fails unless nothing of the tree can write the ticks file any
// more: its only writer, the child's own bash (echo is a builtin), no
// longer runs. (No waiting to see whether the file grows.)
func quiet(t *testing.T, dir string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "gc.pid"))
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || !gone(pid) {
		t.Errorf("the child writing ticks (%s) still runs after the tree was reported gone", b)
	}
}

func start(t *testing.T, script string, fence *Fence, grace time.Duration) (*Process, *os.File) {
	t.Helper()
	testtool.Require(t, "bash")
	testtool.Require(t, "setsid")
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	p, err := Start(Spec{Path: "/bin/bash", Args: []string{"-c", script}, Env: os.Environ(), Stdout: w, Stderr: w, Grace: grace, Fence: fence})
	w.Close()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Kill(); _, _ = p.Wait(); r.Close() })
	return p, r
}

func TestKillEndsDetachedDescendants(t *testing.T) {
	dir := t.TempDir()
	p, out := start(t, detached(dir), nil, time.Second)
	gc := grandchild(t, dir)
	p.Kill()
	st, err := p.Wait()
	if err != nil || !st.Signaled() || st.Signal() != syscall.SIGKILL {
		t.Fatalf("status %v, err %v; want killed by SIGKILL", st, err)
	}
	if !gone(gc) {
		t.Fatalf("detached child %d still runs after Wait", gc)
	}
	// The output pipe was handed through: it ends with the tree.
	if b, err := io.ReadAll(out); err != nil || string(b) != "started\n" {
		t.Errorf("output %q, %v", b, err)
	}
	quiet(t, dir)
}

func TestTerminateGivesGraceThenKills(t *testing.T) {
	dir := t.TempDir()
	// The detached child ignores SIGTERM: it goes only by SIGKILL.
	script := strings.Replace(detached(dir), "setsid bash -c '", "setsid bash -c 'trap \"\" TERM; ", 1)
	p, _ := start(t, script, nil, time.Second)
	gc := grandchild(t, dir)
	begin := time.Now()
	p.Terminate(300 * time.Millisecond)
	if _, err := p.Wait(); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(begin); took < 300*time.Millisecond {
		t.Errorf("ended after %s, before the grace", took)
	}
	if !gone(gc) {
		t.Fatalf("detached child %d survived", gc)
	}
	quiet(t, dir)
}

// When the main process exits on its own, its status is reported only
// after what it left behind is gone: a child that left the session
// (subreaper), or one in the routine's process group (the fallback).
func TestStatusAfterLeftoversAreGone(t *testing.T) {
	for _, tc := range []struct {
		name, prefix string
		fallback     bool
	}{{"subreaper", "setsid ", false}, {"process-group fallback", "", true}} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.fallback {
				fallback(t)
			}
			dir := t.TempDir()
			script := fmt.Sprintf(`%[2]sbash -c 'trap "" TERM; echo $$ > %[1]s/gc.pid; sleep 0.3; echo done > %[1]s/late' &
while [ ! -s %[1]s/gc.pid ]; do sleep 0.01; done
exit 3`, dir, tc.prefix)
			p, _ := start(t, script, nil, 5*time.Second)
			st, err := p.Wait()
			if err != nil || st.ExitStatus() != 3 {
				t.Fatalf("status %v, %v; want exit 3", st, err)
			}
			if _, err := os.Stat(filepath.Join(dir, "late")); err != nil {
				t.Errorf("status reported before the leftover child finished: %v", err)
			}
			gc := grandchild(t, dir)
			if !gone(gc) {
				t.Errorf("leftover %d still runs", gc)
			}
		})
	}
}

// A lease that is not extended kills the tree at its deadline; one that is
// extended keeps it alive.
func TestLeaseDeadlineKills(t *testing.T) {
	const ttl = time.Second // renewals come every 250 ms even on a loaded machine
	dir := t.TempDir()
	lease := NewLease(time.Now().Add(ttl))
	// Renewed from the start, so a slow start under load cannot end it.
	stop := renewing(lease, ttl)
	p, _ := start(t, detached(dir), &Fence{Lease: lease}, time.Second)
	gc := grandchild(t, dir)
	select {
	case <-p.Done():
		t.Fatal("the tree was killed although the lease was renewed")
	case <-time.After(2 * ttl): // longer than the lease
	}
	last := stop()
	if _, err := p.Wait(); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(last); took > ttl+2*time.Second {
		t.Errorf("killed %s after the last renewal; the lease was %s", took, ttl)
	}
	if !gone(gc) {
		t.Fatalf("detached child %d survived the lease", gc)
	}
	quiet(t, dir)
}

// renewing extends lease to ttl from now every ttl/4 until the returned
// stop is called, which returns the time of the last renewal.
func renewing(lease *Lease, ttl time.Duration) (stop func() time.Time) {
	done := make(chan struct{})
	last := make(chan time.Time, 1)
	go func() {
		tick := time.NewTicker(ttl / 4)
		defer tick.Stop()
		at := time.Now()
		for {
			select {
			case <-done:
				last <- at
				return
			case <-tick.C:
				at = time.Now()
				lease.Extend(at.Add(ttl))
			}
		}
	}()
	return func() time.Time { close(done); return <-last }
}

// helper starts this test binary as a worker supervising script and
// returns it once the routine runs.
func helper(t *testing.T, script string) *exec.Cmd {
	t.Helper()
	testtool.Require(t, "bash")
	testtool.Require(t, "setsid")
	return startHelper(t, exec.Command(os.Args[0]), script)
}

// startHelper starts cmd, which runs this test binary, as a worker
// supervising script and returns it once the routine runs.
func startHelper(t *testing.T, cmd *exec.Cmd, script string) *exec.Cmd {
	t.Helper()
	cmd.Env = append(os.Environ(), helperEnv+"="+script)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGCONT)
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "ready") {
		t.Fatalf("helper worker: %q, %v", line, err)
	}
	return cmd
}

// A worker killed with SIGKILL cannot clean up; its supervisor sees the
// control pipe close and kills the tree, setsid descendants included.
func TestWorkerDeathKillsTree(t *testing.T) {
	dir := t.TempDir()
	w := helper(t, detached(dir))
	gc := grandchild(t, dir)
	_ = w.Process.Kill()
	testtool.WaitFor(t, 5*time.Second, "the detached child to be killed", func() bool { return gone(gc) })
	quiet(t, dir)
}

// A stopped worker sends no renewals; its supervisor kills the tree when
// the lease runs out although the worker still exists.
func TestStoppedWorkerLosesTree(t *testing.T) {
	dir := t.TempDir()
	w := helper(t, detached(dir))
	gc := grandchild(t, dir)
	// Longer than the lease: renewals keep it; checked all along.
	for until := time.Now().Add(3 * helperTTL / 2); time.Now().Before(until); time.Sleep(20 * time.Millisecond) {
		if gone(gc) {
			t.Fatal("the tree died while the worker renewed its lease")
		}
	}
	_ = w.Process.Signal(syscall.SIGSTOP)
	stopped := time.Now()
	testtool.WaitFor(t, helperTTL+5*time.Second, "the detached child to be killed", func() bool { return gone(gc) })
	if took := time.Since(stopped); took > helperTTL+2*time.Second {
		t.Errorf("killed %s after the worker stopped; the lease was %s", took, helperTTL)
	}
	quiet(t, dir)
}

// A process of the tree whose parent dies after the SIGTERM round (here
// one the main process's TERM handler starts, detached, before it exits)
// is handed to the supervisor and gets SIGTERM then, not SIGKILL when the
// grace runs out.
func TestTerminateReachesOrphansOfTheRound(t *testing.T) {
	if !haveSubreaper {
		t.Skip("the process-group fallback sees no detached process")
	}
	dir := t.TempDir()
	script := fmt.Sprintf(`trap 'setsid bash -c "echo \$\$ > %[1]s/gc.pid; exec sleep 100" & while [ ! -s %[1]s/gc.pid ]; do sleep 0.01; done; exit 0' TERM
echo ready > %[1]s/ready
sleep 100 &
wait`, dir)
	p, _ := start(t, script, nil, 30*time.Second)
	testtool.WaitFor(t, 10*time.Second, "the routine to start", func() bool {
		_, err := os.Stat(filepath.Join(dir, "ready"))
		return err == nil
	})
	begin := time.Now()
	p.Terminate(30 * time.Second)
	if _, err := p.Wait(); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(begin); took > 15*time.Second {
		t.Errorf("the tree ended %s after SIGTERM: the orphan got no SIGTERM and waited for the grace's SIGKILL", took)
	}
	if gc := grandchild(t, dir); !gone(gc) {
		t.Errorf("orphan %d still runs", gc)
	}
}

// Every process that exists when the tree is terminated gets SIGTERM,
// also a detached child whose parent the group signal kills at that very
// moment. Repeated, because a listing taken while the parent dies missed
// the child about one time in five on a loaded machine.
func TestTerminateReachesDetachedChildEveryTime(t *testing.T) {
	if !haveSubreaper {
		t.Skip("the process-group fallback sees no detached process")
	}
	for i := range 20 {
		dir := t.TempDir()
		script := fmt.Sprintf(`setsid bash -c 'echo $$ > %[1]s/gc.pid; exec sleep 100' &
sleep 100 &
echo $! > %[1]s/sleep.pid
wait`, dir)
		p, _ := start(t, script, nil, 30*time.Second)
		testtool.WaitFor(t, 10*time.Second, "the routine's processes to start", func() bool {
			a, errA := os.ReadFile(filepath.Join(dir, "gc.pid"))
			b, errB := os.ReadFile(filepath.Join(dir, "sleep.pid"))
			return errA == nil && errB == nil && len(a) > 0 && len(b) > 0
		})
		begin := time.Now()
		p.Terminate(30 * time.Second)
		if _, err := p.Wait(); err != nil {
			t.Fatal(err)
		}
		if took := time.Since(begin); took > 15*time.Second {
			t.Fatalf("run %d: the tree ended %s after SIGTERM; a process missed it and waited for SIGKILL", i, took)
		}
	}
}
