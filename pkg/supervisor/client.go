package supervisor

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Spec is one process to run under a supervisor.
type Spec struct {
	// Path and Args are the program and its arguments (Args excludes
	// argv[0]); Dir the working directory; Env the full environment.
	Path string
	Args []string
	Dir  string
	Env  []string
	// Stdin, Stdout and Stderr are handed to the routine as they are (no
	// copy); nil means /dev/null.
	Stdin, Stdout, Stderr *os.File
	// Grace is the SIGTERM -> SIGKILL delay for processes the main process
	// leaves behind when it exits.
	Grace time.Duration
	// Fence ties the process to a lease; nil means no deadline.
	Fence *Fence
}

// Fence is what binds an attempt's processes to the worker's lease.
type Fence struct {
	// Lease, when set, is the deadline the supervisor enforces.
	Lease *Lease
	// Hold, when set, is a file every supervisor keeps open until its tree
	// is gone (the worker's process lock, see worker.Run).
	Hold *os.File
}

// Process is a supervised process tree.
type Process struct {
	cmd    *exec.Cmd
	pid    int
	mu     sync.Mutex // serialises control writes
	ctrl   *os.File
	done   chan struct{}
	status syscall.WaitStatus
	err    error
}

// Start starts s under a supervisor of its own (see the package
// documentation). It returns once the routine's main process runs, or
// with an error saying why it could not be started.
//
// One Start starts one supervisor, which starts the routine at most once:
// when the supervisor cannot be started or ends without reporting the
// routine started, Start fails and never tries again, since the routine
// may have run. (Supervisors used to be started ahead of need and a
// request that met a dead one was sent again to a fresh one; a supervisor
// that died after starting the routine, before its report, so ran the
// routine twice. Starting on demand costs about 1.5 ms per attempt with
// decree-supervisor beside the executable.)
func Start(s Spec) (*Process, error) {
	req := request{Path: s.Path, Args: append([]string{s.Path}, s.Args...), Dir: s.Dir, Env: s.Env, Grace: s.Grace, Fallback: useFallback}
	var lease *Lease
	if s.Fence != nil && s.Fence.Lease != nil {
		lease = s.Fence.Lease
		req.Deadline, _ = lease.current()
	}
	req.Hold = s.Fence != nil && s.Fence.Hold != nil
	line, err := json.Marshal(req)
	if err != nil {
		return nil, fmt.Errorf("encode the process to supervise: %w", err)
	}
	line = append(line, '\n')

	stdio := []*os.File{s.Stdin, s.Stdout, s.Stderr}
	for i, f := range stdio {
		if f != nil {
			continue
		}
		null, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
		if err != nil {
			return nil, fmt.Errorf("open %s for the routine: %w", os.DevNull, err)
		}
		defer null.Close()
		stdio[i] = null
	}
	ctrlR, ctrlW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("create supervisor control pipe: %w", err)
	}
	repR, repW, err := os.Pipe()
	if err != nil {
		ctrlR.Close()
		ctrlW.Close()
		return nil, fmt.Errorf("create supervisor report pipe: %w", err)
	}
	cmd := exec.Command(program())
	cmd.Args = []string{"decree-attempt-supervisor"}
	cmd.Env = append(os.Environ(), envKey+"=1")
	cmd.ExtraFiles = append([]*os.File{ctrlR, repW}, stdio...)
	if req.Hold {
		cmd.ExtraFiles = append(cmd.ExtraFiles, s.Fence.Hold)
	}
	// Its own process group: a signal to the worker's group (Ctrl-C)
	// must not reach it; the worker tells it what to do.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	err = cmd.Start()
	ctrlR.Close()
	repW.Close()
	if err != nil {
		ctrlW.Close()
		repR.Close()
		return nil, fmt.Errorf("start the attempt supervisor: %w", err)
	}
	// A supervisor that died makes the write fail (EPIPE), not block.
	_, err = ctrlW.Write(line)
	rep := bufio.NewReader(repR)
	first, rerr := rep.ReadString('\n')
	if err != nil || rerr != nil || !strings.HasPrefix(first, "S ") {
		// Never started again: the routine may have run. The supervisor
		// is killed (its routine with it, by its parent-death signal
		// where there is one) and reaped.
		ctrlW.Close()
		repR.Close()
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		switch {
		case strings.HasPrefix(first, "E "):
			return nil, errors.New(strings.TrimSpace(first[2:]))
		default:
			return nil, fmt.Errorf("the attempt supervisor ended without saying whether it started %s (%v); not started again, as it may have run", s.Path, errors.Join(err, rerr))
		}
	}
	p := &Process{cmd: cmd, ctrl: ctrlW, done: make(chan struct{})}
	p.pid, _ = strconv.Atoi(strings.TrimSpace(first[2:]))
	go p.wait(rep, repR)
	if lease != nil {
		go p.follow(lease)
	}
	return p, nil
}

// useFallback makes supervisors use the portable process-group fallback
// even where the kernel offers more (tests of the fallback on Linux).
var useFallback = false

// Protocol names the request and report format between a worker and its
// supervisors; a separate decree-supervisor program is used only when it
// prints the same with --protocol.
const Protocol = "decree-attempt-supervisor/2"

// program is what Start starts: decree-supervisor beside the running
// executable when it speaks Protocol (a small program starts several
// times faster than a worker's whole executable, and a supervisor starts
// for every attempt), else the running executable itself, which serves
// as a supervisor through this package's init function.
var program = sync.OnceValue(func() string {
	exe, err := os.Executable()
	if err != nil {
		return selfExe()
	}
	return programBeside(exe)
})

// programBeside returns decree-supervisor in exe's directory when it
// prints Protocol when asked, else selfExe().
func programBeside(exe string) string {
	sibling := filepath.Join(filepath.Dir(exe), "decree-supervisor")
	if sibling == exe {
		return selfExe()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, sibling, "--protocol").Output()
	if err != nil || strings.TrimSpace(string(out)) != Protocol {
		return selfExe()
	}
	return sibling
}

// wait reads the final report, then reaps the supervisor.
func (p *Process) wait(rep *bufio.Reader, repR *os.File) {
	line, err := rep.ReadString('\n')
	repR.Close()
	werr := p.cmd.Wait()
	switch {
	case err == nil && strings.HasPrefix(line, "R "):
		n, perr := strconv.ParseUint(strings.TrimSpace(line[2:]), 10, 32)
		p.status, p.err = syscall.WaitStatus(n), perr
	default:
		// The supervisor died without reporting (killed by someone).
		p.err = fmt.Errorf("the attempt supervisor ended without a report (%v); its processes may not all be gone", errors.Join(err, werr))
	}
	p.mu.Lock()
	p.ctrl.Close()
	p.ctrl = nil
	p.mu.Unlock()
	close(p.done)
}

// follow passes every extension of the lease to the supervisor.
func (p *Process) follow(l *Lease) {
	last := int64(-1)
	for {
		d, changed := l.current()
		if d != last {
			p.send('K', d)
			last = d
		}
		select {
		case <-changed:
		case <-p.done:
			return
		}
	}
}

func (p *Process) send(op byte, arg int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ctrl != nil {
		_, _ = fmt.Fprintf(p.ctrl, "%c %d\n", op, arg)
	}
}

// Pid is the routine's main process id, which is also its process group.
func (p *Process) Pid() int { return p.pid }

// SupervisorPid is the supervisor's own process id.
func (p *Process) SupervisorPid() int { return p.cmd.Process.Pid }

// Terminate asks for SIGTERM to the whole tree and SIGKILL to whatever is
// left after grace.
func (p *Process) Terminate(grace time.Duration) { p.send('T', int64(max(grace, 0))) }

// Kill asks for SIGKILL to the whole tree now.
func (p *Process) Kill() { p.send('X', 0) }

// Done is closed once every process of the tree is gone and the status is
// known.
func (p *Process) Done() <-chan struct{} { return p.done }

// Wait waits until every process of the tree is gone and returns the main
// process's wait status. The error is set when the supervisor itself
// failed.
func (p *Process) Wait() (syscall.WaitStatus, error) {
	<-p.done
	return p.status, p.err
}
