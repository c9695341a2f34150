package testtool

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// SyncBuffer is a bytes.Buffer that a process may write while a test reads.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Proc is a process a test runs in the background.
type Proc struct {
	Name string
	Cmd  *exec.Cmd
	// Out holds what the process wrote to stderr, and to stdout unless
	// Cmd.Stdout was set before Start.
	Out  *SyncBuffer
	done chan struct{}
	err  error
}

// stopGrace is how long cleanup waits after SIGTERM before SIGKILL.
const stopGrace = 20 * time.Second

// Start starts cmd in the background. At cleanup it is sent SIGTERM, then
// SIGKILL after 20 s, and its output is logged if the test failed.
func Start(t testing.TB, name string, cmd *exec.Cmd) *Proc {
	t.Helper()
	p := &Proc{Name: name, Cmd: cmd, Out: &SyncBuffer{}, done: make(chan struct{})}
	if cmd.Stdout == nil {
		cmd.Stdout = p.Out
	}
	cmd.Stderr = p.Out
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	go func() { p.err = cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		p.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(stopGrace):
			p.Signal(syscall.SIGKILL)
			<-p.done
		}
		if t.Failed() {
			t.Logf("%s output:\n%s", name, p.Out)
		}
	})
	return p
}

// Signal sends sig unless the process has exited.
func (p *Proc) Signal(sig syscall.Signal) {
	select {
	case <-p.done:
	default:
		_ = p.Cmd.Process.Signal(sig)
	}
}

// Done is closed when the process has exited.
func (p *Proc) Done() <-chan struct{} { return p.done }

// Err is the process's exit error, once Done is closed.
func (p *Proc) Err() error { return p.err }

// Wait waits up to d for the process to exit and returns its exit code.
func (p *Proc) Wait(t testing.TB, d time.Duration) int {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(d):
		t.Fatalf("%s did not exit within %s\n%s", p.Name, d, p.Out)
	}
	var ee *exec.ExitError
	if errors.As(p.err, &ee) {
		return ee.ExitCode()
	}
	return 0
}

// WaitFor polls cond until it holds, failing the test after d.
func WaitFor(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", d, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// StartListening starts a decree-controller command (its Stdout must be
// unset) and waits up to 30s for the TCP address it prints as "listening
// on ADDR"; the test fails when the controller exits or prints none.
func StartListening(t testing.TB, cmd *exec.Cmd) (string, *Proc) {
	t.Helper()
	pr, pw := io.Pipe()
	cmd.Stdout = pw
	p := Start(t, "decree-controller", cmd)
	addrs := make(chan string, 4)
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			if a, ok := strings.CutPrefix(sc.Text(), "listening on "); ok && !strings.HasSuffix(a, ".sock") {
				addrs <- a
			}
		}
	}()
	go func() { <-p.Done(); pw.Close() }()
	select {
	case a := <-addrs:
		return a, p
	case <-p.Done():
		t.Fatalf("decree-controller exited before listening: %v\n%s", p.Err(), p.Out)
	case <-time.After(30 * time.Second):
		t.Fatalf("decree-controller printed no TCP address within 30s\n%s", p.Out)
	}
	return "", nil
}

// ProcStatusKiB reads a "VmHWM"/"VmRSS" line of /proc/PID/status, in KiB;
// the test is skipped where there is no /proc (memory is measured on Linux
// only).
func ProcStatusKiB(t testing.TB, pid int, key string) int {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Skipf("no /proc status for pid %d (%v): this test measures memory on Linux only", pid, err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, key+":"); ok {
			n, err := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")))
			if err != nil {
				t.Fatalf("parse %q of /proc/%d/status: %v", line, pid, err)
			}
			return n
		}
	}
	t.Fatalf("/proc/%d/status has no %s line", pid, key)
	return 0
}
