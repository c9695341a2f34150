package worker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"regexp"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/decreehq/decree/pkg/fsutil"
	"github.com/decreehq/decree/pkg/supervisor"
	decreev1 "github.com/decreehq/decree/proto/decree/v1"
	"github.com/decreehq/decree/worker/logship"
)

// LogStream is the name of the log an assignment writes: "routine",
// "router", or "hook-<point>" for hooks (hook-beforeeach, hook-aftereach,
// ...), so the hooks around one attempt keep separate logs.
func LogStream(a *decreev1.Assignment) string {
	switch a.GetKind() {
	case decreev1.AssignmentKind_ASSIGNMENT_KIND_HOOK:
		if point := strings.ToLower(a.GetEnv()["DECREE_HOOK"]); hookPointRe.MatchString(point) {
			return "hook-" + point
		}
		return "hook"
	case decreev1.AssignmentKind_ASSIGNMENT_KIND_ROUTER:
		return "router"
	case decreev1.AssignmentKind_ASSIGNMENT_KIND_PRE_CHECK:
		return "pre-check"
	default:
		return "routine"
	}
}

var hookPointRe = regexp.MustCompile(`^[a-z]{1,26}$`)

func (w *worker) runJob(ctx, drain context.Context, a *decreev1.Assignment) {
	token := a.GetLeaseToken()
	var stopped bool
	defer func() {
		if stopped { // tell the controller at once that it is over
			select {
			case w.kick <- struct{}{}:
			default:
			}
		}
	}()
	defer w.leases.finish(token)
	log := w.log.With("message", a.GetMessageId(), "attempt", a.GetAttempt(), "kind", a.GetKind().String())

	jobCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	if err := w.leases.start(token, cancel); err != nil {
		log.Info("lease stopped before the work started; skipping it", "reason", err)
		return
	}
	w.counted()

	stream := LogStream(a)
	logs := w.startLog(drain, a, token, stream, log, cancel)
	go w.fence(jobCtx, token, cancel)
	start := time.Now()
	var res *Result
	var rep *replicaOutcome
	deadline, err := w.confirm(jobCtx, token)
	if deadline != nil {
		jobCtx = withFence(jobCtx, &supervisor.Fence{Lease: deadline, Hold: w.hold})
	}
	switch {
	case err != nil:
		log.Warn("assignment not started", "reason", err)
	case w.needsSync(a):
		log.Info("assignment started")
		res, rep, err = w.executeReplica(jobCtx, drain, a, logs.out, log)
	default:
		log.Info("assignment started")
		res, err = w.execute(jobCtx, a, logs.out)
	}
	logs.close()
	stopped = jobCtx.Err() != nil
	if err != nil {
		res = &Result{Status: &decreev1.ExitStatus{ExitCode: -1, Error: err.Error()}}
	}
	if res == nil || res.Status == nil {
		res = &Result{Status: &decreev1.ExitStatus{ExitCode: -1, Error: "executor returned no status"}}
	}
	st := res.Status
	if st.Duration == nil {
		st.Duration = durationpb.New(time.Since(start))
	}
	if deadline != nil && deadline.Remaining() <= 0 && jobCtx.Err() == nil {
		// The supervisor killed the work at the lease deadline before the
		// worker's own check noticed: say why.
		cancel(fmt.Errorf("the lease expired: no heartbeat renewed it in time (lease TTL %s)", time.Duration(w.leaseTTL.Load())))
	}
	if cause := context.Cause(jobCtx); cause != nil && jobCtx.Err() != nil && !st.TimedOut {
		// Why the work was stopped comes first; what the stop caused
		// (a signal, a refused write) follows.
		if st.Error == "" {
			st.Error = "stopped: " + cause.Error()
		} else {
			st.Error = "stopped: " + cause.Error() + "; " + st.Error
		}
	}

	req := &decreev1.CompleteAssignmentRequest{
		LeaseToken: token,
		Status:     st,
		Output:     res.Output,
		LogSizes:   map[string]uint64{stream: logs.wait()},
	}
	if a.GetMessageId() == "" {
		req.LogSizes = nil
	}
	rep.fill(req)
	if !w.complete(drain, log, req) {
		// Ran but not reported: never hand it back (it ran); a draining
		// heartbeat keeps listing it, so it ends as "worker lost".
		w.leases.unreported(token)
	}
}

// execute places the run files and runs the assignment.
func (w *worker) execute(ctx context.Context, a *decreev1.Assignment, buf io.Writer) (*Result, error) {
	switch a.GetKind() {
	case decreev1.AssignmentKind_ASSIGNMENT_KIND_ROUTINE, decreev1.AssignmentKind_ASSIGNMENT_KIND_HOOK,
		decreev1.AssignmentKind_ASSIGNMENT_KIND_ROUTER, decreev1.AssignmentKind_ASSIGNMENT_KIND_PRE_CHECK:
	default:
		return nil, fmt.Errorf("assignment for %s has kind %v, which this worker does not know; upgrade the worker", a.GetMessageId(), a.GetKind())
	}
	if err := w.writeRunFiles(ctx, a); err != nil {
		return nil, err
	}
	return w.opts.Executor.Execute(ctx, a, w.workspace, buf)
}

// complete reports the result, retrying across reconnections until the
// controller answers or drain ends; false when no answer came.
func (w *worker) complete(drain context.Context, log *slog.Logger, req *decreev1.CompleteAssignmentRequest) bool {
	for failures := 0; ; failures++ {
		cctx, cancel := context.WithTimeout(drain, defaultCallTimeout)
		resp, err := w.client.CompleteAssignment(cctx, req)
		cancel()
		if err == nil {
			if resp.GetAccepted() {
				log.Info("assignment reported", "exit_code", req.GetStatus().GetExitCode(), "note", resp.GetNote())
			} else {
				log.Warn("controller did not accept the result", "note", resp.GetNote())
			}
			return true
		}
		if logship.Permanent(err) {
			log.Error("controller refused the result", "err", err)
			return true
		}
		log.Warn("reporting the result failed; retrying", "err", err)
		if serr := w.opts.Backoff.Sleep(drain, failures); serr != nil {
			log.Error("gave up reporting the result", "err", errors.Join(err, serr))
			return false
		}
	}
}

func mkdirConfined(ws, rel string) error {
	full, err := fsutil.ConfinedJoin(ws, rel)
	if err != nil {
		return err
	}
	return os.MkdirAll(full, 0o755)
}

// fence stops the work when no heartbeat has renewed its lease for the
// lease TTL: the controller then counts the attempt as lost and may run it
// elsewhere, so this worker must not keep changing the tree.
func (w *worker) fence(ctx context.Context, token string, cancel context.CancelCauseFunc) {
	for {
		ttl := time.Duration(w.leaseTTL.Load())
		check := time.Second
		if ttl > 0 {
			check = max(ttl/4, 10*time.Millisecond)
		}
		t := time.NewTimer(check)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		if ttl > 0 {
			if since := w.leases.sinceRenewed(token); since > ttl {
				cancel(fmt.Errorf("the lease expired: no heartbeat reached the controller for %s (lease TTL %s)", since.Round(time.Millisecond), ttl))
				return
			}
		}
	}
}
