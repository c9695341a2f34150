package supervisor

import (
	"bufio"
	"encoding/json"
	"fmt"
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
	// Hold says that the worker's process lock came as descriptor
	// holdFD, held until the supervisor exits.
	Hold bool `json:"hold,omitempty"`
	// Fallback asks for the portable process-group fallback even where
	// the kernel offers a subreaper (tests of the fallback).
	Fallback bool `json:"fallback,omitempty"`
}

// command is one control line after the request.
type command struct {
	op  byte  // 'K' deadline, 'T' terminate with grace, 'X' kill, 0 EOF
	arg int64 // deadline (K) or grace (T), nanoseconds
}

// serve is the supervisor's main function; it returns the exit code.
func serve() int {
	// The main process gets a parent-death signal where there is one,
	// which Linux ties to the thread that forked it: keep this goroutine
	// on one thread for good.
	runtime.LockOSThread()
	for _, fd := range []int{ctrlFD, reportFD, stdinFD, stdoutFD, stderrFD, holdFD} {
		unix.CloseOnExec(fd) // none may reach the routine but as its 0, 1, 2
	}
	report := os.NewFile(reportFD, "report")
	ignoreSignals()
	children := make(chan os.Signal, 64)
	signal.Notify(children, syscall.SIGCHLD)
	terms := make(chan os.Signal, 1)
	signal.Notify(terms, syscall.SIGTERM)
	in := bufio.NewReader(os.NewFile(ctrlFD, "control"))
	line, err := in.ReadBytes('\n')
	var req request
	if err == nil {
		err = json.Unmarshal(line, &req)
	}
	if err != nil {
		fmt.Fprintf(report, "E read the routine to run from the worker: %v\n", err)
		return 1
	}
	t := newTree(req.Fallback)
	if err := t.prepare(); err != nil {
		fmt.Fprintf(report, "E %v\n", err)
		return 1
	}

	// syscall.ForkExec, not os.StartProcess: the latter's first use in a
	// process forks a probe child (for pidfd support) that a supervisor,
	// which starts one process in its life, would pay for every attempt.
	path, args, env := req.Path, req.Args, lastWins(req.Env)
	if signalsBlocked() || signalsIgnored() {
		// Go starts children with the signal mask the program started
		// with, and exec keeps ignored signals ignored; only a fresh exec
		// from a thread with an empty mask and no ignored signal clears
		// them (see execUnblocked). Paid only in that case.
		path, args, env = selfExe(), append([]string{"decree-exec-unblocked", req.Path}, req.Args...), append(env[:len(env):len(env)], envUnblock+"=1")
	}
	pid, err := syscall.ForkExec(path, args, &syscall.ProcAttr{
		Dir:   req.Dir,
		Env:   env,
		Files: []uintptr{stdinFD, stdoutFD, stderrFD},
		Sys:   t.procAttr(),
	})
	// Only the routine's tree may hold the output pipes from now on.
	for _, fd := range []int{stdinFD, stdoutFD, stderrFD} {
		_ = unix.Close(fd)
	}
	if err != nil {
		fmt.Fprintf(report, "E start %s: %s\n", req.Path, oneLine(err.Error()))
		return 1
	}
	fmt.Fprintf(report, "S %d\n", pid)

	cmds := make(chan command, 16)
	go readCommands(in, cmds)
	t.main = pid
	status := t.run(req, cmds, children, terms)
	t.reapAll()
	fmt.Fprintf(report, "R %d\n", uint32(status))
	return 0
}

// ignoreSignals makes the supervisor deaf to the signals a terminal or a
// closed pipe would send it (the worker tells it what to do), without
// passing that on to the routine: a signal ignored with signal.Ignore
// stays ignored across fork and exec, so a routine would start with
// SIGPIPE ignored (`yes | head -1` printing "Broken pipe") or, when decree
// was started in the background by a script (SIGINT and SIGQUIT ignored)
// or under nohup (SIGHUP), unable to be interrupted. Signals delivered to
// a channel instead are reset to their default in the child (the Go
// runtime resets every signal it handles when it forks), so the routine
// starts with every disposition at its default. Its signal mask is
// emptied too, when there is anything in it (see execUnblocked).
func ignoreSignals() {
	sink := make(chan os.Signal, 8)
	signal.Notify(sink, syscall.SIGINT, syscall.SIGQUIT, syscall.SIGHUP, syscall.SIGPIPE, syscall.SIGTTIN, syscall.SIGTTOU)
	go func() {
		for range sink {
		}
	}()
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
		if terminating && remain {
			t.termOrphans()
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
