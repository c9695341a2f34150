package worker

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os/exec"

	"github.com/decreehq/decree/pkg/driver/proc"

	decreev1 "github.com/decreehq/decree/proto/decree/v1"
)

// runRouter runs Assignment.command with `bash -c` in the workspace through
// pkg/driver/proc (the same process handling as every routine), feeding
// Assignment.stdin; stdout is the answer (at most o.RouterOutputLimit
// bytes), stderr goes to the log.
func runRouter(ctx context.Context, o ExecOptions, a *decreev1.Assignment, ws string, out io.Writer) (*Result, error) {
	if a.GetCommand() == "" {
		return nil, fmt.Errorf("router assignment for %s has no command; set the router command in .decree/config.yml", a.GetMessageId())
	}
	env, err := environment(o.Env, a)
	if err != nil {
		return nil, err
	}
	answer := &limitedBuffer{limit: o.RouterOutputLimit}
	stdin := a.GetStdin()
	if stdin == nil {
		stdin = []byte{}
	}
	bash, err := exec.LookPath("bash")
	if err != nil {
		return nil, fmt.Errorf("router of %s: bash is needed to run the router command but was not found: %w", a.GetMessageId(), err)
	}
	h, err := proc.Start(proc.Spec{
		Path:    bash,
		Args:    []string{"-c", a.GetCommand()},
		Dir:     ws,
		Env:     env,
		Stdin:   stdin,
		Output:  answer,
		Stderr:  out,
		Timeout: timeoutOf(a),
		Grace:   o.Grace,
		Fence:   fenceFrom(ctx),
	})
	if err != nil {
		return nil, fmt.Errorf("router of %s: %w", a.GetMessageId(), err)
	}
	st := exitStatus(waitStopping(ctx, h, o.Grace))
	if answer.over {
		if st.ExitCode == 0 {
			st.ExitCode = 1
		}
		msg := fmt.Sprintf("router answer is longer than %d bytes; the rest was discarded (make the router command print only its answer)", o.RouterOutputLimit)
		if st.Error == "" {
			st.Error = msg
		} else {
			st.Error += "; " + msg
		}
	}
	return &Result{Status: st, Output: answer.buf.Bytes()}, nil
}

// limitedBuffer keeps the first limit bytes written and drops the rest,
// noting that it did (it never fails, so the process is not blocked).
type limitedBuffer struct {
	buf   bytes.Buffer
	limit int
	over  bool
}

func (l *limitedBuffer) Write(p []byte) (int, error) {
	room := l.limit - l.buf.Len()
	if len(p) > room {
		l.over = true
		l.buf.Write(p[:max(room, 0)])
		return len(p), nil
	}
	return l.buf.Write(p)
}
