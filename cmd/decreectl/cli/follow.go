package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"

	decreev1 "github.com/decreehq/decree/proto/decree/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// errControllerGone is wrapped by follow when the controller went away
// (it stopped, or its connection broke) before the work finished.
var errControllerGone = errors.New("the controller went away")

// followSpec says which events to follow and when to stop.
type followSpec struct {
	from  uint64
	chain string
	job   string
	logs  bool
	done  func(*decreev1.Event) bool
}

// followResult counts what happened while following.
type followResult struct {
	succeeded int
	dead      int
	last      *decreev1.Event
}

// follow prints progress from the event stream on stderr and, when asked,
// streams each attempt's routine output to stdout as it is produced, until
// spec.done says the work is over.
func (g *globals) follow(ctx context.Context, c decreev1.ControllerServiceClient, spec followSpec) (followResult, error) {
	var res followResult
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := c.WatchEvents(ctx, &decreev1.WatchEventsRequest{FromSequence: spec.from, Chain: spec.chain, JobId: spec.job, Follow: true})
	if err != nil {
		return res, describe(err)
	}
	var logs sync.WaitGroup
	defer logs.Wait()
	stopCountdown := func() {}
	defer func() { stopCountdown() }()
	for {
		resp, err := stream.Recv()
		stopCountdown()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return res, fmt.Errorf("%w: the controller closed the event stream before the work finished", errControllerGone)
			}
			if ctx.Err() != nil {
				return res, ctx.Err()
			}
			if status.Code(err) == codes.Unavailable {
				return res, fmt.Errorf("%w: %v", errControllerGone, describe(err))
			}
			return res, describe(err)
		}
		ev := resp.GetEvent()
		res.last = ev
		switch ev.GetKind() {
		case decreev1.EventKind_EVENT_KIND_ATTEMPT_STARTED:
			if spec.logs {
				logs.Add(1)
				go func() {
					defer logs.Done()
					streamLog(ctx, c, ev.GetMessageId(), ev.GetAttempt(), g.stdout)
				}()
			}
		case decreev1.EventKind_EVENT_KIND_ATTEMPT_FINISHED:
			logs.Wait() // the attempt's output is printed before its result
		case decreev1.EventKind_EVENT_KIND_MESSAGE_DONE:
			res.succeeded++
		case decreev1.EventKind_EVENT_KIND_MESSAGE_DEAD:
			res.dead++
		}
		shown := ev.GetKind() == decreev1.EventKind_EVENT_KIND_WARNING && g.shown.take(ev.GetText())
		if line := eventLine(ev); line != "" && !shown {
			fmt.Fprintln(g.stderr, line)
		}
		stopCountdown = g.countdown(ev)
		if spec.done(ev) {
			return res, nil
		}
	}
}

// streamLog copies one attempt's routine log to w until the attempt ends.
func streamLog(ctx context.Context, c decreev1.ControllerServiceClient, id string, attempt int32, w io.Writer) {
	st, err := c.WatchLogs(ctx, &decreev1.WatchLogsRequest{MessageId: id, Attempt: attempt, Follow: true})
	if err != nil {
		return
	}
	for {
		resp, err := st.Recv()
		if err != nil {
			return
		}
		w.Write(resp.GetChunk().GetData())
	}
}

// eventLine renders an event for people; "" hides it.
func eventLine(ev *decreev1.Event) string {
	id := ev.GetMessageId()
	switch ev.GetKind() {
	case decreev1.EventKind_EVENT_KIND_MESSAGE_QUEUED:
		return fmt.Sprintf("decree: %s queued %s", id, ev.GetText())
	case decreev1.EventKind_EVENT_KIND_MESSAGE_STARTED:
		return fmt.Sprintf("decree: %s started (routine %s)", id, ev.GetRoutine())
	case decreev1.EventKind_EVENT_KIND_ATTEMPT_STARTED:
		return fmt.Sprintf("decree: %s attempt %d started", id, ev.GetAttempt())
	case decreev1.EventKind_EVENT_KIND_ATTEMPT_FINISHED:
		if ev.GetExitCode() == 0 && ev.GetText() == "" {
			return fmt.Sprintf("decree: %s attempt %d succeeded", id, ev.GetAttempt())
		}
		if t := ev.GetText(); t != "" && t != fmt.Sprintf("exit code %d", ev.GetExitCode()) {
			return fmt.Sprintf("decree: %s attempt %d failed (exit %d): %s", id, ev.GetAttempt(), ev.GetExitCode(), t)
		}
		return fmt.Sprintf("decree: %s attempt %d failed (exit %d)", id, ev.GetAttempt(), ev.GetExitCode())
	case decreev1.EventKind_EVENT_KIND_USAGE_LIMIT_WAIT:
		return usageWaitLine(ev, clock())
	case decreev1.EventKind_EVENT_KIND_WAITING:
		return fmt.Sprintf("decree: %s waits for a reply (%s): %s", id, ev.GetWaitId(), firstLineOf(ev.GetText()))
	case decreev1.EventKind_EVENT_KIND_REPLIED:
		return fmt.Sprintf("decree: %s got the reply %q (%s)", id, ev.GetText(), ev.GetWaitId())
	case decreev1.EventKind_EVENT_KIND_TIMED_OUT:
		return fmt.Sprintf("decree: %s: %s", id, ev.GetText())
	case decreev1.EventKind_EVENT_KIND_MESSAGE_DONE:
		return fmt.Sprintf("decree: %s done", id)
	case decreev1.EventKind_EVENT_KIND_MESSAGE_DEAD:
		return fmt.Sprintf("decree: %s dead-lettered: %s", id, ev.GetText())
	case decreev1.EventKind_EVENT_KIND_REVERTED:
		return fmt.Sprintf("decree: %s reverted %s", id, ev.GetText())
	case decreev1.EventKind_EVENT_KIND_WARNING:
		return fmt.Sprintf("decree: warning: %s", ev.GetText())
	case decreev1.EventKind_EVENT_KIND_HOOK_FINISHED:
		return fmt.Sprintf("decree: hook %s exited %d", ev.GetText(), ev.GetExitCode())
	case decreev1.EventKind_EVENT_KIND_PROCESS_FINISHED:
		return fmt.Sprintf("decree: process finished: %s", ev.GetText())
	}
	return ""
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func firstLineOf(s string) string {
	line, _, _ := strings.Cut(strings.TrimSpace(s), "\n")
	return line
}
