package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/decreehq/decree/pkg/config"
)

// PromptEnv is the environment variable that holds the prompt of a CLI
// call; the command template's <prompt> becomes a quoted reference to it,
// so the prompt reaches the CLI as one argument and is never parsed by
// the shell.
const PromptEnv = "DECREE_TREE_PROMPT"

// MaxPrompt is the longest prompt a CLI call takes: Linux limits one
// argument (and one environment entry) to 128 KiB.
const MaxPrompt = 128<<10 - len(PromptEnv) - 2

// ShellCommand turns a command template into a bash script in which every
// <prompt> expands to the prompt as one word, whether the placeholder
// stands bare, inside double quotes or inside single quotes.
func ShellCommand(template string) string {
	var b strings.Builder
	var quote byte // 0, '\'' or '"'
	ref := "$" + PromptEnv
	for i := 0; i < len(template); i++ {
		if strings.HasPrefix(template[i:], config.PromptPlaceholder) {
			switch quote {
			case '"':
				b.WriteString("${" + PromptEnv + "}")
			case '\'':
				b.WriteString(`'"` + ref + `"'`)
			default:
				b.WriteString(`"` + ref + `"`)
			}
			i += len(config.PromptPlaceholder) - 1
			continue
		}
		c := template[i]
		switch {
		case c == '\\' && quote != '\'' && i+1 < len(template):
			b.WriteByte(c)
			i++
			c = template[i]
		case quote == 0 && (c == '\'' || c == '"'):
			quote = c
		case quote == c:
			quote = 0
		}
		b.WriteByte(c)
	}
	return b.String()
}

// call is one CLI invocation.
type call struct {
	// Template is the command template, Code its codename.
	Template, Code string
	Prompt         string
	Dir            string
	Env            []string
	Timeout        time.Duration
	Grace          time.Duration
	// Output receives stdout and stderr as they come.
	Output io.Writer
}

// callResult is how a CLI call ended.
type callResult struct {
	Stdout   string
	ExitCode int
	TimedOut bool
	Duration time.Duration
}

// stdoutLimit caps the stdout kept for parsing (the stream gets it all).
const stdoutLimit = 4 << 20

// capped keeps the last n bytes written.
type capped struct {
	buf   bytes.Buffer
	limit int
}

func (c *capped) Write(p []byte) (int, error) {
	c.buf.Write(p)
	if over := c.buf.Len() - c.limit; over > 0 {
		c.buf.Next(over)
	}
	return len(p), nil
}

// run runs the call in its own process group. When the timeout passes or
// ctx ends, the group gets SIGTERM, then SIGKILL after the grace period;
// whatever the CLI leaves running in its group is killed when it exits.
func (c call) run(ctx context.Context) (callResult, error) {
	if len(c.Prompt) > MaxPrompt {
		return callResult{}, fmt.Errorf("the prompt is %d bytes, more than the %d a command-line argument can hold; shorten it (refer to {{message_file}} instead of quoting {{message}})", len(c.Prompt), MaxPrompt)
	}
	out := &capped{limit: stdoutLimit}
	cmd := exec.Command("bash", "-c", ShellCommand(c.Template))
	cmd.Dir = c.Dir
	cmd.Env = append(append([]string(nil), c.Env...), PromptEnv+"="+c.Prompt)
	live := &lockedWriter{w: c.Output}
	cmd.Stdout = io.MultiWriter(out, live)
	cmd.Stderr = live
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.WaitDelay = c.Grace // a descendant holding the pipes open cannot hang us
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return callResult{}, fmt.Errorf("start bash for CLI %s: %w", c.Code, err)
	}
	pgid := cmd.Process.Pid
	var timeout <-chan time.Time
	if c.Timeout > 0 {
		t := time.NewTimer(c.Timeout)
		defer t.Stop()
		timeout = t.C
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	res := callResult{}
	var err error
	select {
	case err = <-done:
	case <-timeout:
		res.TimedOut = true
		err = killGroup(pgid, c.Grace, done)
	case <-ctx.Done():
		err = killGroup(pgid, c.Grace, done)
	}
	_ = syscall.Kill(-pgid, syscall.SIGKILL) // leftovers of the group
	res.Duration = time.Since(start)
	res.Stdout = out.buf.String()
	res.ExitCode = cmd.ProcessState.ExitCode()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) && !errors.Is(err, exec.ErrWaitDelay) {
		return res, fmt.Errorf("run CLI %s: %w", c.Code, err)
	}
	if cerr := ctx.Err(); cerr != nil && !res.TimedOut {
		return res, fmt.Errorf("stopped: %w", cerr)
	}
	return res, nil
}

// lockedWriter serialises the CLI's stdout and stderr copiers.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// killGroup sends SIGTERM to the group, SIGKILL after grace, and waits.
func killGroup(pgid int, grace time.Duration, done <-chan error) error {
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	select {
	case err := <-done:
		return err
	case <-time.After(grace):
	}
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	return <-done
}
