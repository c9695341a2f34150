package supervisor

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// request is the first line the worker sends: what to run.
type request struct {
	Path string   `json:"path"`
	Args []string `json:"args"` // argv, including argv[0]
	Dir  string   `json:"dir"`
	Env  []string `json:"env"`
	// Grace is the SIGTERM -> SIGKILL delay for what the main process
	// leaves behind when it exits on its own.
	Grace time.Duration `json:"grace"`
	// Deadline is the first lease deadline (CLOCK_MONOTONIC ns; 0: none).
	Deadline int64 `json:"deadline"`
	// Hold says that a fourth descriptor came with the request after the
	// routine's stdin, stdout and stderr: the worker's process lock, held
	// until the supervisor exits.
	Hold bool `json:"hold,omitempty"`
}

// command is one control line after the request.
type command struct {
	op  byte  // 'K' deadline, 'T' terminate with grace, 'X' kill, 0 EOF
	arg int64 // deadline (K) or grace (T), nanoseconds
}

// serve is the supervisor's main function; it returns the exit code.
func serve() int {
	// The main process gets a parent-death signal, which Linux ties to the
	// thread that forked it: keep this goroutine on one thread for good.
	runtime.LockOSThread()
	for _, fd := range []int{ctrlFD, reportFD} {
		unix.CloseOnExec(fd) // neither may reach the routine
	}
	report := os.NewFile(reportFD, "report")
	signal.Ignore(syscall.SIGINT, syscall.SIGQUIT, syscall.SIGHUP, syscall.SIGPIPE, syscall.SIGTTIN, syscall.SIGTTOU)
	if err := becomeSubreaper(); err != nil {
		fmt.Fprintf(report, "E make the attempt supervisor a child subreaper: %v\n", err)
		return 1
	}
	line, fds, rest, err := readRequest(ctrlFD)
	if errors.Is(err, io.EOF) && len(line) == 0 && len(fds) == 0 {
		return 0 // a spare whose worker went away before using it
	}
	var req request
	if err == nil {
		err = json.Unmarshal(line, &req)
	}
	want := 3
	if err == nil && req.Hold {
		want = 4
	}
	if err == nil && len(fds) != want {
		err = fmt.Errorf("%d descriptors came with the request, want %d", len(fds), want)
	}
	if err != nil {
		fmt.Fprintf(report, "E read the routine to run from the worker: %v\n", err)
		return 1
	}
	// The process lock (if any) stays open, unused, until this process
	// exits; the standard descriptors go to the routine only.
	stdio := []*os.File{os.NewFile(uintptr(fds[0]), "stdin"), os.NewFile(uintptr(fds[1]), "stdout"), os.NewFile(uintptr(fds[2]), "stderr")}
	in := bufio.NewReader(io.MultiReader(bytes.NewReader(rest), os.NewFile(ctrlFD, "control")))
	children := make(chan os.Signal, 64)
	signal.Notify(children, syscall.SIGCHLD)
	terms := make(chan os.Signal, 1)
	signal.Notify(terms, syscall.SIGTERM)

	// syscall.ForkExec, not os.StartProcess: the latter's first use in a
	// process forks a probe child (for pidfd support) that a supervisor,
	// which starts one process in its life, would pay for every attempt.
	pid, err := syscall.ForkExec(req.Path, req.Args, &syscall.ProcAttr{
		Dir:   req.Dir,
		Env:   req.Env,
		Files: []uintptr{stdio[0].Fd(), stdio[1].Fd(), stdio[2].Fd()},
		Sys:   routineSysProcAttr(),
	})
	// Only the routine's tree may hold the output pipes from now on.
	for _, f := range stdio {
		f.Close()
	}
	if err != nil {
		fmt.Fprintf(report, "E start %s: %s\n", req.Path, oneLine(err.Error()))
		return 1
	}
	fmt.Fprintf(report, "S %d\n", pid)

	cmds := make(chan command, 16)
	go readCommands(in, cmds)
	s := &tree{self: os.Getpid(), main: pid}
	status := s.run(req, cmds, children, terms)
	s.reapAll()
	fmt.Fprintf(report, "R %d\n", uint32(status))
	return 0
}

// readRequest reads the first line from the control socket with the
// descriptors attached to it (received close-on-exec). It returns the line
// without its newline and whatever was read after it.
func readRequest(fd int) (line []byte, fds []int, rest []byte, err error) {
	buf := make([]byte, 64<<10)
	oob := make([]byte, unix.CmsgSpace(8*4))
	var data []byte
	for {
		n, oobn, _, _, rerr := unix.Recvmsg(fd, buf, oob, recvmsgCloexec)
		if rerr == unix.EINTR {
			continue
		}
		if rerr != nil {
			return nil, fds, nil, rerr
		}
		if oobn > 0 {
			msgs, perr := unix.ParseSocketControlMessage(oob[:oobn])
			if perr != nil {
				return nil, fds, nil, perr
			}
			for i := range msgs {
				got, perr := unix.ParseUnixRights(&msgs[i])
				if perr != nil {
					return nil, fds, nil, perr
				}
				for _, fd := range got {
					unix.CloseOnExec(fd) // already so on Linux (MSG_CMSG_CLOEXEC)
				}
				fds = append(fds, got...)
			}
		}
		if n == 0 {
			return data, fds, nil, io.EOF
		}
		data = append(data, buf[:n]...)
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			return data[:i], fds, data[i+1:], nil
		}
	}
}

// readCommands parses control lines until end-of-file, which it reports
// as a command with op 0.
func readCommands(in *bufio.Reader, out chan<- command) {
	for {
		line, err := in.ReadString('\n')
		if err != nil {
			out <- command{}
			return
		}
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		c := command{op: line[0]}
		if len(line) > 2 {
			c.arg, _ = strconv.ParseInt(line[2:], 10, 64)
		}
		out <- c
	}
}

func oneLine(s string) string { return strings.ReplaceAll(s, "\n", " ") }

// tree is the supervised process tree.
type tree struct {
	self, main int
	mainDone   bool
	status     syscall.WaitStatus
}

// run supervises until the main process has exited and every descendant
// is gone, and returns the main process's wait status.
func (t *tree) run(req request, cmds <-chan command, children, terms <-chan os.Signal) syscall.WaitStatus {
	deadline := newDeadline(req.Deadline)
	defer deadline.stop()
	var (
		terminating bool
		killAt      <-chan time.Time
		poll        <-chan time.Time
	)
	ticker := time.NewTicker(10 * time.Millisecond)
	defer ticker.Stop()
	terminate := func(grace time.Duration) {
		if !terminating {
			terminating = true
			if t.reap() {
				t.signalAll(syscall.SIGTERM)
			}
		}
		if killAt == nil || grace <= 0 {
			killAt = time.After(max(grace, 0))
		}
		poll = ticker.C
	}
	for {
		remain := t.reap()
		if t.mainDone && !terminating {
			terminate(req.Grace)
			remain = t.reap()
		}
		if t.mainDone && !remain {
			return t.status
		}
		select {
		case <-children:
		case <-poll:
		case <-killAt:
			return t.killAll()
		case <-deadline.c:
			return t.killAll() // the lease ran out: no grace
		case <-terms:
			return t.killAll()
		case c := <-cmds:
			switch c.op {
			case 'K':
				deadline.set(c.arg)
			case 'T':
				terminate(time.Duration(c.arg))
			default: // 'X', or end-of-file: the worker is gone
				return t.killAll()
			}
		}
	}
}

// killAll kills every descendant until none is left, reaps the main
// process and returns its status.
func (t *tree) killAll() syscall.WaitStatus {
	for {
		if !t.reap() {
			return t.status // no child left: no descendant either
		}
		for _, pid := range t.descendants() {
			_ = unix.Kill(pid, unix.SIGKILL)
		}
		time.Sleep(time.Millisecond)
	}
}

// signalAll sends sig to the routine's process group and to every
// descendant (some may have left the group).
func (t *tree) signalAll(sig syscall.Signal) {
	_ = unix.Kill(-t.main, sig)
	for _, pid := range t.descendants() {
		_ = unix.Kill(pid, sig)
	}
}

// reap collects every exited child (orphans are reparented here), noting
// the main process's status, and reports whether children remain. As the
// supervisor is a subreaper, every live descendant has a live parent chain
// up to it: no child left means no descendant left, which the kernel
// tells exactly (ECHILD), without a look at /proc.
func (t *tree) reap() (remain bool) {
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		switch {
		case err == syscall.EINTR:
			continue
		case err != nil: // ECHILD
			return false
		case pid == 0:
			return true
		case pid == t.main:
			t.mainDone, t.status = true, ws
		}
	}
}

// reapAll waits for every remaining child (all are dead or dying) until
// none is left, so that no zombie of the tree outlives the report.
func (t *tree) reapAll() {
	for {
		var ws syscall.WaitStatus
		_, err := syscall.Wait4(-1, &ws, 0, nil)
		if err == syscall.EINTR {
			continue
		}
		if err != nil { // ECHILD: none left
			return
		}
	}
}

// descendants lists the processes whose parent chain leads to the
// supervisor, following /proc/PID/task/TID/children from the supervisor
// down; when that finds none while children remain (the kernel's lists
// may miss a process being reparented), it scans all of /proc.
func (t *tree) descendants() []int {
	var out []int
	queue := []int{t.self}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, c := range childrenOf(p) {
			out = append(out, c)
			queue = append(queue, c)
		}
	}
	if len(out) == 0 {
		return t.scan()
	}
	return out
}

// childrenOf reads the children of every thread of pid.
func childrenOf(pid int) []int {
	dir := "/proc/" + strconv.Itoa(pid) + "/task"
	tasks, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var out []int
	for _, task := range tasks {
		b, err := os.ReadFile(dir + "/" + task.Name() + "/children")
		if err != nil {
			continue
		}
		for _, f := range strings.Fields(string(b)) {
			if c, err := strconv.Atoi(f); err == nil {
				out = append(out, c)
			}
		}
	}
	return out
}

// scan lists the live (not zombie) descendants from a walk of all of /proc.
func (t *tree) scan() []int {
	kids := map[int][]int{}
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		ppid, state, ok := procStat(pid)
		if !ok || state == 'Z' || state == 'X' {
			continue
		}
		kids[ppid] = append(kids[ppid], pid)
	}
	var out []int
	queue := []int{t.self}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, c := range kids[p] {
			out = append(out, c)
			queue = append(queue, c)
		}
	}
	return out
}

// procStat reads the parent pid and state of pid from /proc/PID/stat.
func procStat(pid int) (ppid int, state byte, ok bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, 0, false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')') // the command name may hold anything
	if i < 0 || i+2 >= len(s) {
		return 0, 0, false
	}
	f := strings.Fields(s[i+2:])
	if len(f) < 2 {
		return 0, 0, false
	}
	ppid, err = strconv.Atoi(f[1])
	return ppid, f[0][0], err == nil
}

// deadline is the lease deadline as a timer.
type deadline struct {
	t *time.Timer
	c <-chan time.Time
}

func newDeadline(mono int64) *deadline {
	d := &deadline{}
	d.set(mono)
	return d
}

// set moves the deadline to mono (CLOCK_MONOTONIC ns); 0 removes it.
func (d *deadline) set(mono int64) {
	d.stop()
	if mono == 0 {
		d.t, d.c = nil, nil
		return
	}
	d.t = time.NewTimer(time.Duration(mono - monoNow()))
	d.c = d.t.C
}

func (d *deadline) stop() {
	if d.t != nil {
		d.t.Stop()
	}
}
