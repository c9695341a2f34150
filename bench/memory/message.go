package main

import (
	"bytes"
	"crypto/rand"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// The message scenario: one message with a large body runs a routine that
// checks the body it got (its size) and succeeds. Its peak RSS is measured
// for each process that handles the body:
//
//   - embedded: decreectl alone (controller and local worker in-process);
//   - separate: decree-controller, an in-place decree-worker and decreectl,
//     three processes over the unix socket;
//   - replica: the same with the worker in a workspace of its own, so the
//     message reaches it through the replica transfer.
//
// The reference, measured in the same run, is `cat` of the same body into
// a file: the cost of moving the bytes with a fixed buffer.
const messageRoutine = `#!/usr/bin/env bash
# Records the size of the message file it got
set -euo pipefail
wc -c < "$message_file" > message-size.txt
`

// procRSS is one process's peak RSS in KiB.
type procRSS struct {
	name string
	kib  int64
}

func measureMessage(bins string, mb int, modes []string, keep bool) error {
	dir, err := os.MkdirTemp("", "decree-membench-msg-")
	if err != nil {
		return err
	}
	if !keep {
		defer os.RemoveAll(dir)
	}
	body := filepath.Join(dir, "body.md")
	if err := writeBody(body, int64(mb)<<20); err != nil {
		return err
	}
	catRSS, out, err := runIn(dir, body, "bash", "-c", "cat > copy.md")
	if err != nil {
		return fmt.Errorf("cat: %v\n%s", err, out)
	}
	for _, mode := range modes {
		procs, elapsed, err := messageRun(bins, dir, body, int64(mb)<<20, mode)
		if err != nil {
			return fmt.Errorf("%s: %w", mode, err)
		}
		for _, p := range procs {
			goal := "yes"
			if p.kib >= 100<<10 {
				goal = "NO"
			}
			fmt.Printf("%-8s %-9s %-18s %-12s %-12s %-8.1f %-10s %s\n", fmt.Sprintf("%d MB", mb), mode, p.name,
				fmt.Sprintf("%.1f MB", float64(p.kib)/1024), fmt.Sprintf("%.1f MB", float64(catRSS)/1024),
				float64(p.kib)/float64(catRSS), goal, elapsed.Round(100*time.Millisecond))
		}
	}
	return nil
}

// writeBody writes a text body of size bytes: lines of random hex.
func writeBody(path string, size int64) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	raw := make([]byte, 32<<10)
	line := make([]byte, 0, 128)
	var written int64
	for written < size {
		if _, err := rand.Read(raw); err != nil {
			return err
		}
		var chunk bytes.Buffer
		for i := 0; i+40 <= len(raw) && written+int64(chunk.Len()) < size; i += 40 {
			line = fmt.Appendf(line[:0], "%x\n", raw[i:i+40])
			chunk.Write(line)
		}
		b := chunk.Bytes()
		if rest := size - written; int64(len(b)) > rest {
			b = b[:rest]
		}
		if _, err := f.Write(b); err != nil {
			f.Close()
			return err
		}
		written += int64(len(b))
	}
	return f.Close()
}

// messageRun runs one message of the body in a fresh project in the given
// mode and returns the peak RSS of each decree process.
func messageRun(bins, dir, body string, size int64, mode string) ([]procRSS, time.Duration, error) {
	proj := filepath.Join(dir, "project-"+mode)
	if err := os.Mkdir(proj, 0o755); err != nil {
		return nil, 0, err
	}
	ctl := filepath.Join(bins, "decreectl")
	if _, out, err := runIn(proj, "", ctl, "init"); err != nil {
		return nil, 0, fmt.Errorf("decreectl init: %v\n%s", err, out)
	}
	if err := os.WriteFile(filepath.Join(proj, ".decree", "routines", "develop.sh"), []byte(messageRoutine), 0o755); err != nil {
		return nil, 0, err
	}
	var bg []*background
	stopAll := func() []procRSS {
		var out []procRSS
		for i := len(bg) - 1; i >= 0; i-- {
			out = append([]procRSS{{name: bg[i].name, kib: bg[i].stop()}}, out...)
		}
		bg = nil
		return out
	}
	defer stopAll()
	if mode != "embedded" {
		c, err := startBackground("decree-controller", proj, filepath.Join(bins, "decree-controller"), "--project", proj)
		if err != nil {
			return nil, 0, err
		}
		bg = append(bg, c)
		sock := filepath.Join(proj, ".decree", "decree.sock")
		if err := waitSocket(sock, c); err != nil {
			return nil, 0, err
		}
		ws := proj
		if mode == "replica" {
			ws = filepath.Join(dir, "replica-"+mode)
			if err := os.Mkdir(ws, 0o755); err != nil {
				return nil, 0, err
			}
		}
		w, err := startBackground("decree-worker", ws, filepath.Join(bins, "decree-worker"), "--controller", "unix://"+sock, "--workspace", ws, "--id", "bench")
		if err != nil {
			return nil, 0, err
		}
		bg = append(bg, w)
	}
	start := time.Now()
	rss, out, err := runIn(proj, body, ctl, "run", "-q", "-m", "big", "-v", "routine=develop")
	elapsed := time.Since(start)
	if err != nil {
		return nil, 0, fmt.Errorf("decreectl run: %v\n%s", err, out)
	}
	got, err := os.ReadFile(filepath.Join(proj, "message-size.txt"))
	if err != nil {
		return nil, 0, fmt.Errorf("the routine left no message-size.txt: %v\n%s", err, out)
	}
	if n, _ := strconv.ParseInt(strings.TrimSpace(string(got)), 10, 64); n < size {
		return nil, 0, fmt.Errorf("the routine saw a message of %d bytes, want at least the body's %d", n, size)
	}
	return append([]procRSS{{name: "decreectl", kib: rss}}, stopAll()...), elapsed, nil
}

// runIn runs name in dir with stdin from the file in (none when empty) and
// returns its peak RSS in KiB and its output.
func runIn(dir, in, name string, args ...string) (int64, string, error) {
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "DECREE_CONTROLLER=")
	if in != "" {
		f, err := os.Open(in)
		if err != nil {
			return 0, "", err
		}
		defer f.Close()
		cmd.Stdin = f
	}
	out, err := cmd.CombinedOutput()
	var rss int64
	if cmd.ProcessState != nil {
		if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
			rss = ru.Maxrss
		}
	}
	return rss, string(out), err
}

// background is a decree process running while decreectl runs.
type background struct {
	name string
	cmd  *exec.Cmd
	out  bytes.Buffer
	done chan struct{}
}

func startBackground(name, dir, path string, args ...string) (*background, error) {
	b := &background{name: name, cmd: exec.Command(path, args...), done: make(chan struct{})}
	b.cmd.Dir = dir
	b.cmd.Env = append(os.Environ(), "DECREE_CONTROLLER=")
	b.cmd.Stdout, b.cmd.Stderr = &b.out, &b.out
	if err := b.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	go func() { _ = b.cmd.Wait(); close(b.done) }()
	return b, nil
}

// stop ends the process (SIGTERM, then SIGKILL) and returns its peak RSS
// in KiB.
func (b *background) stop() int64 {
	_ = b.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-b.done:
	case <-time.After(20 * time.Second):
		_ = b.cmd.Process.Kill()
		<-b.done
	}
	if ru, ok := b.cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		return ru.Maxrss
	}
	return 0
}

func waitSocket(sock string, c *background) error {
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-c.done:
			return fmt.Errorf("decree-controller exited early:\n%s", c.out.String())
		default:
		}
		if conn, err := net.Dial("unix", sock); err == nil {
			conn.Close()
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("the controller's socket %s did not open", sock)
}
