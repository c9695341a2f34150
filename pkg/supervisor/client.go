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

	"golang.org/x/sys/unix"
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

// Start starts s under a supervisor (this binary, see the package
// documentation). It returns once the routine's main process runs, or
// with an error saying why it could not be started.
//
// The supervisor is usually one started ahead of need (a spare): starting
// a Go program costs a few milliseconds, which would otherwise be paid by
// every attempt, hook and router call. A spare waits, running nothing,
// for the one request it will serve; the routine's standard descriptors
// and the worker's process lock reach it with the request (SCM_RIGHTS),
// so the spare needs nothing of the attempt when it starts. After each
// Start the next spare is started in the background. A spare whose worker
// exits reads end-of-file and exits without running anything.
func Start(s Spec) (*Process, error) {
	if sp := takeSpare(); sp != nil {
		p, err := sp.run(s)
		refill()
		if err == nil || !errors.Is(err, errSpareGone) {
			return p, err
		}
		// The spare died while waiting (killed by someone): start afresh.
	}
	sp, err := spawn()
	if err != nil {
		return nil, err
	}
	refill()
	p, err := sp.run(s)
	if errors.Is(err, errSpareGone) {
		return nil, fmt.Errorf("the attempt supervisor exited before it was told what to run: %w", err)
	}
	return p, err
}

// errSpareGone is returned (wrapped) by run when the supervisor could not
// be given the request.
var errSpareGone = errors.New("supervisor not reachable")

// spare is a supervisor process that waits for its request.
type spare struct {
	cmd  *exec.Cmd
	ctrl *os.File // the worker's end of the control socket
	rep  *os.File // the read end of the report pipe
}

var spares struct {
	mu   sync.Mutex
	next *spare
	// filling is closed when the spare being started is in next (or
	// failed); nil when none is being started.
	filling chan struct{}
}

// takeSpare returns the waiting spare, waiting for the one being started
// if there is one (it is further along than a new one would be); nil when
// there is none.
func takeSpare() *spare {
	spares.mu.Lock()
	if sp := spares.next; sp != nil {
		spares.next = nil
		spares.mu.Unlock()
		return sp
	}
	filling := spares.filling
	spares.mu.Unlock()
	if filling == nil {
		return nil
	}
	<-filling
	spares.mu.Lock()
	defer spares.mu.Unlock()
	sp := spares.next
	spares.next = nil
	return sp
}

// refill starts the next spare in the background unless one waits or is
// being started.
func refill() {
	spares.mu.Lock()
	defer spares.mu.Unlock()
	if spares.next != nil || spares.filling != nil {
		return
	}
	filling := make(chan struct{})
	spares.filling = filling
	go func() {
		sp, err := spawn()
		spares.mu.Lock()
		defer spares.mu.Unlock()
		spares.filling = nil
		defer close(filling)
		if err != nil {
			return // the next Start spawns one itself and reports the error
		}
		if spares.next != nil {
			sp.discard()
			return
		}
		spares.next = sp
	}()
}

// Protocol names the request and report format between a worker and its
// supervisors; a separate decree-supervisor program is used only when it
// prints the same with --protocol.
const Protocol = "decree-attempt-supervisor/1"

// program is what spawn starts: decree-supervisor beside the running
// executable when it speaks Protocol (a small program starts several
// times faster than a worker's whole executable, and a supervisor starts
// for every attempt), else the running executable itself, which serves
// as a supervisor through this package's init function.
var program = sync.OnceValue(func() string {
	exe, err := os.Executable()
	if err != nil {
		return selfExe
	}
	return programBeside(exe)
})

// selfExe starts the running executable again.
const selfExe = "/proc/self/exe"

// programBeside returns decree-supervisor in exe's directory when it
// prints Protocol when asked, else selfExe.
func programBeside(exe string) string {
	sibling := filepath.Join(filepath.Dir(exe), "decree-supervisor")
	if sibling == exe {
		return selfExe
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, sibling, "--protocol").Output()
	if err != nil || strings.TrimSpace(string(out)) != Protocol {
		return selfExe
	}
	return sibling
}

// spawn starts a supervisor that waits for its request on a control
// socket (descriptor 3) and reports on a pipe (descriptor 4).
func spawn() (*spare, error) {
	fds, err := socketpairCloexec()
	if err != nil {
		return nil, fmt.Errorf("create supervisor control socket: %w", err)
	}
	ctrlW, ctrlR := os.NewFile(uintptr(fds[0]), "supervisor control"), os.NewFile(uintptr(fds[1]), "supervisor control")
	repR, repW, err := os.Pipe()
	if err != nil {
		ctrlR.Close()
		ctrlW.Close()
		return nil, fmt.Errorf("create supervisor report pipe: %w", err)
	}
	cmd := exec.Command(program())
	cmd.Args = []string{"decree-attempt-supervisor"}
	cmd.Env = append(os.Environ(), envKey+"=1")
	cmd.ExtraFiles = []*os.File{ctrlR, repW}
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
	return &spare{cmd: cmd, ctrl: ctrlW, rep: repR}, nil
}

// discard ends a spare that will not be used.
func (sp *spare) discard() {
	sp.ctrl.Close()
	sp.rep.Close()
	go func() { _ = sp.cmd.Wait() }()
}

// run sends s to the spare and waits until the routine runs.
func (sp *spare) run(s Spec) (*Process, error) {
	req := request{Path: s.Path, Args: append([]string{s.Path}, s.Args...), Dir: s.Dir, Env: s.Env, Grace: s.Grace}
	var lease *Lease
	if s.Fence != nil && s.Fence.Lease != nil {
		lease = s.Fence.Lease
		req.Deadline, _ = lease.current()
	}
	files := []*os.File{s.Stdin, s.Stdout, s.Stderr}
	for i, f := range files {
		if f != nil {
			continue
		}
		null, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
		if err != nil {
			sp.discard()
			return nil, fmt.Errorf("open %s for the routine: %w", os.DevNull, err)
		}
		defer null.Close()
		files[i] = null
	}
	if s.Fence != nil && s.Fence.Hold != nil {
		files = append(files, s.Fence.Hold)
		req.Hold = true
	}
	line, err := json.Marshal(req)
	if err != nil {
		sp.discard()
		return nil, fmt.Errorf("encode the process to supervise: %w", err)
	}
	line = append(line, '\n')
	if err := sendWithFiles(sp.ctrl, line, files); err != nil {
		sp.discard()
		return nil, fmt.Errorf("%w: send the request: %v", errSpareGone, err)
	}
	p := &Process{cmd: sp.cmd, ctrl: sp.ctrl, done: make(chan struct{})}
	rep := bufio.NewReader(sp.rep)
	first, rerr := rep.ReadString('\n')
	if rerr != nil || !strings.HasPrefix(first, "S ") {
		sp.ctrl.Close()
		sp.rep.Close()
		_ = sp.cmd.Wait()
		switch {
		case strings.HasPrefix(first, "E "):
			return nil, errors.New(strings.TrimSpace(first[2:]))
		case first == "":
			return nil, fmt.Errorf("%w: no report (%v)", errSpareGone, rerr)
		default:
			return nil, fmt.Errorf("the attempt supervisor did not start %s (%v): %s", s.Path, rerr, strings.TrimSpace(first))
		}
	}
	p.pid, _ = strconv.Atoi(strings.TrimSpace(first[2:]))
	go p.wait(rep, sp.rep)
	if lease != nil {
		go p.follow(lease)
	}
	return p, nil
}

// sendWithFiles writes b to the socket f with files attached to its first
// byte (SCM_RIGHTS), the rest of b as plain writes.
func sendWithFiles(f *os.File, b []byte, files []*os.File) error {
	fds := make([]int, len(files))
	for i, file := range files {
		fds[i] = int(file.Fd())
	}
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var n int
	var serr error
	err = rc.Write(func(fd uintptr) bool {
		n, serr = unix.SendmsgN(int(fd), b, unix.UnixRights(fds...), nil, unix.MSG_NOSIGNAL)
		return serr != unix.EAGAIN
	})
	if err == nil {
		err = serr
	}
	if err != nil {
		return err
	}
	_, err = f.Write(b[n:])
	return err
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
