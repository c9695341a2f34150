package worker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync/atomic"
	"syscall"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	decreev1 "github.com/decreehq/decree/proto/decree/v1"
)

// procSpec is one process to run in its own process group.
type procSpec struct {
	Args    []string
	Dir     string
	Env     []string
	Stdin   io.Reader
	Stdout  io.Writer // the log; also receives stderr when Stderr is nil
	Stderr  io.Writer
	Timeout time.Duration // zero: none
	Grace   time.Duration // between SIGTERM and SIGKILL when stopping
}

// lingerAfterExit is how long output of processes that escaped the process
// group (setsid) may keep the log open after the routine exited.
const lingerAfterExit = 2 * time.Second

// runProcess runs p and reports how it ended. The process gets its own
// process group; when ctx ends or the timeout passes, the group receives
// SIGTERM and, after the grace period, SIGKILL. When the main process exits,
// whatever is left of its group is killed, so a routine's background
// processes never outlive it. Stdout (and Stderr when nil) receive the bytes
// exactly, in order, through one pipe; writes may block (flow control).
func runProcess(ctx context.Context, p procSpec) *decreev1.ExitStatus {
	start := time.Now()
	fail := func(format string, a ...any) *decreev1.ExitStatus {
		return &decreev1.ExitStatus{ExitCode: -1, Error: fmt.Sprintf(format, a...), Duration: durationpb.New(time.Since(start))}
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		return fail("create output pipe: %v", err)
	}
	cmd := exec.Command(p.Args[0], p.Args[1:]...)
	cmd.Dir = p.Dir
	cmd.Env = p.Env
	cmd.Stdin = p.Stdin
	cmd.Stdout = pw
	cmd.Stderr = pw
	var errPipe *os.File
	var errDone chan error
	if p.Stderr != nil {
		er, ew, err := os.Pipe()
		if err != nil {
			pr.Close()
			pw.Close()
			return fail("create error pipe: %v", err)
		}
		cmd.Stderr = ew
		errPipe = ew
		errDone = make(chan error, 1)
		go func() {
			_, err := io.Copy(p.Stderr, er)
			er.Close()
			errDone <- err
		}()
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.WaitDelay = lingerAfterExit // bounds the stdin copy after exit
	if err := cmd.Start(); err != nil {
		pr.Close()
		pw.Close()
		if errPipe != nil {
			errPipe.Close()
			<-errDone
		}
		return fail("start %s: %v", p.Args[0], err)
	}
	pw.Close()
	if errPipe != nil {
		errPipe.Close()
	}
	pgid := cmd.Process.Pid

	var reads atomic.Int64 // odd while a read is in progress
	copyDone := make(chan error, 1)
	go func() { copyDone <- copyOut(p.Stdout, pr, &reads) }()

	exited := make(chan struct{})
	var timedOut, stopped atomic.Bool
	go func() {
		var tc <-chan time.Time
		if p.Timeout > 0 {
			t := time.NewTimer(p.Timeout)
			defer t.Stop()
			tc = t.C
		}
		select {
		case <-exited:
			return
		case <-ctx.Done():
			stopped.Store(true)
		case <-tc:
			timedOut.Store(true)
		}
		_ = syscall.Kill(-pgid, syscall.SIGTERM)
		g := time.NewTimer(p.Grace)
		defer g.Stop()
		select {
		case <-exited:
		case <-g.C:
			_ = syscall.Kill(-pgid, syscall.SIGKILL)
		}
	}()
	waitErr := cmd.Wait()
	close(exited)
	_ = syscall.Kill(-pgid, syscall.SIGKILL) // leftovers of the group
	copyErr := waitCopy(copyDone, pr, &reads)
	pr.Close()
	if errDone != nil {
		if err := <-errDone; err != nil && copyErr == nil {
			copyErr = err
		}
	}

	st := &decreev1.ExitStatus{Duration: durationpb.New(time.Since(start))}
	var ee *exec.ExitError
	switch {
	case waitErr == nil:
	case errors.As(waitErr, &ee):
		ws, _ := ee.Sys().(syscall.WaitStatus)
		if ws.Signaled() {
			st.Signal = int32(ws.Signal())
			st.ExitCode = 128 + st.Signal
			if !stopped.Load() && !timedOut.Load() {
				st.Error = fmt.Sprintf("killed by signal %d (%s)", st.Signal, ws.Signal())
			}
		} else {
			st.ExitCode = int32(ws.ExitStatus())
		}
	default:
		st.ExitCode = -1
		st.Error = fmt.Sprintf("wait for %s: %v", p.Args[0], waitErr)
	}
	if timedOut.Load() {
		st.ExitCode = 1
		st.TimedOut = true
		st.Error = fmt.Sprintf("timed out after %s", p.Timeout)
	}
	if copyErr != nil {
		msg := fmt.Sprintf("output was not fully delivered: %v", copyErr)
		if st.Error == "" {
			st.Error = msg
		} else {
			st.Error += "; " + msg
		}
	}
	return st
}

// copyOut copies the pipe to w, counting reads: reads is odd while a read is
// in progress.
func copyOut(w io.Writer, r *os.File, reads *atomic.Int64) error {
	buf := make([]byte, 32<<10)
	for {
		reads.Add(1)
		n, err := r.Read(buf)
		reads.Add(1)
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil {
				return werr
			}
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// waitCopy waits for the output copy to finish after the process group is
// gone. If a process outside the group still holds the pipe and one read
// waits for lingerAfterExit with nothing arriving, the copy is cut short; a
// copy slowed by the log's flow control is never cut.
func waitCopy(done chan error, r *os.File, reads *atomic.Int64) error {
	t := time.NewTicker(lingerAfterExit)
	defer t.Stop()
	last := int64(-1)
	for {
		select {
		case err := <-done:
			if errors.Is(err, os.ErrDeadlineExceeded) {
				return nil
			}
			return err
		case <-t.C:
			n := reads.Load()
			if n%2 == 1 && n == last {
				_ = r.SetReadDeadline(time.Now())
			}
			last = n
		}
	}
}
