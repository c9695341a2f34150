// Package proc runs one routine process the way every decree driver needs:
// under a per-attempt supervisor (pkg/supervisor) that owns its whole
// process tree, in its own process group, stdin from /dev/null, stdout and
// stderr on one pipe (so their order is kept), output delivered with
// bounded buffering, a timeout that stops the whole tree, and no process of
// the tree left running after the main process exits. The exit event comes
// only after every process of the tree is gone. It implements
// driver.Handle.
package proc

import (
	"context"
	"fmt"
	"io"
	"os"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/decreehq/decree/pkg/driver"
	"github.com/decreehq/decree/pkg/supervisor"
)

const (
	pipeSize = 1 << 20
	sinkBuf  = 256 << 10
)

// Spec describes the process to run.
type Spec struct {
	// Path and Args are the program and its arguments (Args excludes argv[0]).
	Path string
	Args []string
	// Dir is the working directory; Env the full environment.
	Dir string
	Env []string
	// Timeout caps the run; 0 means none.
	Timeout time.Duration
	// Grace is the SIGTERM -> SIGKILL delay used on timeout and when
	// cleaning up leftovers of the group; 0 means driver.DefaultKillGrace.
	Grace time.Duration
	// Output receives all output synchronously when set; otherwise output
	// is sent as driver.EventOutput events.
	Output io.Writer
	// Tee, when set, also receives all output (for a log file).
	Tee io.Writer
	// Stdin is fed to the process; nil means /dev/null.
	Stdin []byte
	// Stderr, when set, receives the process's stderr through a pipe of
	// its own, synchronously; Output, Tee and the events then carry only
	// stdout. A router's answer is its stdout, its log its stderr.
	Stderr io.Writer
	// Finish, when set, may amend the result before the exit event is sent
	// (a notebook driver checks its output notebook here).
	Finish func(*driver.ExitResult)
	// Fence ties the process tree to the worker's lease (see
	// pkg/supervisor); nil means none.
	Fence *supervisor.Fence
}

// Handle is a running process; it implements driver.Handle.
type Handle struct {
	spec       Spec
	sup        *supervisor.Process
	pgid       int
	start      time.Time
	events     chan driver.Event
	exited     chan struct{} // every process of the tree is gone
	done       chan struct{} // result ready, events closed
	timedOut   atomic.Bool
	stopped    atomic.Bool
	timer      *time.Timer
	result     driver.ExitResult
	sinkErr    error
	errSinkErr error // written by copyStderr only, read after it finished
}

var _ driver.Handle = (*Handle)(nil)

// Start launches the process described by s under its own supervisor.
func Start(s Spec) (*Handle, error) {
	if s.Grace <= 0 {
		s.Grace = driver.DefaultKillGrace
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("create output pipe: %w", err)
	}
	// A larger pipe means fewer wake-ups per megabyte (measured: about 1.6x
	// the throughput of the default 64 KiB). Best effort: the limit is
	// /proc/sys/fs/pipe-max-size.
	growPipe(pw)
	stdin, feed, err := openStdin(s.Stdin)
	if err != nil {
		pr.Close()
		pw.Close()
		return nil, err
	}
	errW := pw
	var errR *os.File
	if s.Stderr != nil {
		if errR, errW, err = os.Pipe(); err != nil {
			pr.Close()
			pw.Close()
			stdin.Close()
			return nil, fmt.Errorf("create error pipe: %w", err)
		}
	}
	sup, err := supervisor.Start(supervisor.Spec{
		Path: s.Path, Args: s.Args, Dir: s.Dir, Env: s.Env,
		Stdin: stdin, Stdout: pw, Stderr: errW,
		Grace: s.Grace, Fence: s.Fence,
	})
	pw.Close()
	stdin.Close()
	if errR != nil {
		errW.Close()
	}
	if err != nil {
		pr.Close()
		if errR != nil {
			errR.Close()
		}
		if feed != nil {
			feed.Close()
		}
		return nil, fmt.Errorf("start %s: %w", s.Path, err)
	}
	if feed != nil {
		go func() {
			_, _ = feed.Write(s.Stdin) // EPIPE when the process does not read it all
			feed.Close()
		}()
	}
	h := &Handle{
		spec:   s,
		sup:    sup,
		pgid:   sup.Pid(),
		start:  time.Now(),
		events: make(chan driver.Event, 8),
		exited: make(chan struct{}),
		done:   make(chan struct{}),
	}
	if s.Timeout > 0 {
		h.timer = time.AfterFunc(s.Timeout, func() {
			select {
			case <-h.exited:
				return // finished on its own just in time
			default:
			}
			h.timedOut.Store(true)
			_ = h.Stop(s.Grace)
		})
	}
	readDone := make(chan struct{})
	if errR != nil {
		errDone := make(chan struct{})
		go h.copyStderr(errR, errDone)
		go h.read(pr, readDone, errDone)
	} else {
		go h.read(pr, readDone, nil)
	}
	go h.supervise(pr, readDone)
	return h, nil
}

// Pid returns the main process id, which is also the process group id.
func (h *Handle) Pid() int { return h.pgid }

// ProcessGroup returns the routine's process group id; it implements
// driver.ProcessHandle.
func (h *Handle) ProcessGroup() int { return h.pgid }

// Events implements driver.Handle.
func (h *Handle) Events() <-chan driver.Event { return h.events }

// Wait implements driver.Handle.
func (h *Handle) Wait(ctx context.Context) (driver.ExitResult, error) {
	select {
	case <-h.done:
		return h.result, nil
	case <-ctx.Done():
		return driver.ExitResult{}, fmt.Errorf("wait for routine: %w", ctx.Err())
	}
}

// Stop implements driver.Handle: SIGTERM to the whole tree, SIGKILL after
// grace; it returns once every process of the tree is gone.
func (h *Handle) Stop(grace time.Duration) error {
	select {
	case <-h.exited:
		return nil
	default:
	}
	h.stopped.Store(true)
	h.sup.Terminate(grace)
	<-h.exited
	return nil
}

// read copies the pipe to the sink or the event channel until EOF or until
// its read deadline is forced; readDone closes once also) is closed.
func (h *Handle) read(pr *os.File, readDone chan<- struct{}, also <-chan struct{}) {
	defer close(readDone)
	if also != nil {
		defer func() { <-also }()
	}
	size := driver.ChunkSize
	if h.spec.Output != nil {
		size = sinkBuf // no per-chunk copies in sink mode: read big
	}
	buf := make([]byte, size)
	for {
		n, err := pr.Read(buf)
		if n > 0 {
			h.deliver(buf[:n])
		}
		if err != nil {
			return
		}
	}
}

// copyStderr copies a separate stderr pipe to Spec.Stderr.
func (h *Handle) copyStderr(r *os.File, done chan<- struct{}) {
	defer close(done)
	defer r.Close()
	buf := make([]byte, driver.ChunkSize)
	for {
		n, err := r.Read(buf)
		if n > 0 && h.errSinkErr == nil {
			if _, werr := h.spec.Stderr.Write(buf[:n]); werr != nil {
				h.errSinkErr = fmt.Errorf("write routine error output: %w", werr)
			}
		}
		if err != nil {
			return
		}
	}
}

func (h *Handle) deliver(p []byte) {
	if h.spec.Tee != nil && h.sinkErr == nil {
		if _, err := h.spec.Tee.Write(p); err != nil {
			h.sinkErr = fmt.Errorf("write routine output log: %w", err)
		}
	}
	if h.spec.Output != nil {
		if h.sinkErr == nil {
			if _, err := h.spec.Output.Write(p); err != nil {
				h.sinkErr = fmt.Errorf("write routine output: %w", err)
			}
		}
		return
	}
	h.events <- driver.Event{Kind: driver.EventOutput, Data: append([]byte(nil), p...)}
}

// supervise waits until the supervisor reports the tree gone, finishes
// reading its output and publishes the result.
func (h *Handle) supervise(pr *os.File, readDone <-chan struct{}) {
	ws, supErr := h.sup.Wait()
	close(h.exited)
	if h.timer != nil {
		h.timer.Stop()
	}
	// Every writer of the pipe is gone, so the read ends at once; only a
	// descriptor smuggled out of the tree (over a unix socket) could keep
	// it open: stop reading after the grace period rather than hang.
	select {
	case <-readDone:
	case <-time.After(h.spec.Grace):
		_ = pr.SetReadDeadline(time.Now())
		<-readDone
	}
	pr.Close()
	h.result = h.makeResult(ws, supErr)
	if h.spec.Finish != nil {
		h.spec.Finish(&h.result)
	}
	h.events <- driver.Event{Kind: driver.EventExit, Exit: h.result}
	close(h.events)
	close(h.done)
}

// openStdin returns the process's stdin: /dev/null, or the read end of a
// pipe whose write end (feed) the caller fills with data.
func openStdin(data []byte) (stdin, feed *os.File, err error) {
	if data == nil {
		f, err := os.Open(os.DevNull)
		if err != nil {
			return nil, nil, fmt.Errorf("open %s for stdin: %w", os.DevNull, err)
		}
		return f, nil, nil
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, nil, fmt.Errorf("create input pipe: %w", err)
	}
	return r, w, nil
}

func (h *Handle) makeResult(ws syscall.WaitStatus, supErr error) driver.ExitResult {
	res := driver.ExitResult{Duration: time.Since(h.start), Stopped: h.stopped.Load()}
	switch {
	case supErr != nil:
		res.ExitCode, res.Err = -1, supErr
		res.Message = supErr.Error()
	case ws.Signaled():
		res.Signal = int(ws.Signal())
		res.ExitCode = 128 + res.Signal
		res.Message = fmt.Sprintf("killed by signal %d (%s)", res.Signal, ws.Signal())
	default:
		res.ExitCode = ws.ExitStatus()
		res.Message = fmt.Sprintf("exit code %d", res.ExitCode)
	}
	if h.stopped.Load() && !h.timedOut.Load() {
		res.Message = "stopped: " + res.Message
	}
	if h.timedOut.Load() {
		res.TimedOut = true
		res.ExitCode = 1
		res.Message = fmt.Sprintf("timed out after %s (%s)", h.spec.Timeout, res.Message)
	}
	if h.sinkErr != nil && res.Err == nil {
		res.Err = h.sinkErr
	}
	if h.errSinkErr != nil && res.Err == nil {
		res.Err = h.errSinkErr
	}
	return res
}
