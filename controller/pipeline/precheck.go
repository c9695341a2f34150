package pipeline

import (
	"context"
	"fmt"
	"path"
	"strings"
	"time"

	"github.com/decreehq/decree/controller/lease"
	"github.com/decreehq/decree/pkg/config"
	"github.com/decreehq/decree/pkg/fsutil"
	"github.com/decreehq/decree/pkg/message"
	"github.com/decreehq/decree/pkg/routine"
	decreev1 "github.com/decreehq/decree/proto/decree/v1"
)

// PreCheckTimeout caps one pre-check (a routine's timeout_s caps it when
// smaller): a readiness check is meant to take seconds.
const PreCheckTimeout = time.Minute

// PreCheckWorkerWait is how long a pre-check waits for a worker to connect
// (on a controller whose workers come and go) before it reports that none
// can run it.
const PreCheckWorkerWait = 5 * time.Second

// PreCheckTarget is one pre-check to run: a routine, alone or for a
// migration (whose spec file it then receives as spec_file).
type PreCheckTarget struct {
	Routine string
	// Migration is the spec file name inside the migrations directory.
	Migration string
}

// PreCheckResult is the outcome of one pre-check.
type PreCheckResult struct {
	PreCheckTarget
	// Ready is true when the pre-check exited 0, or when the routine has
	// none (NoPreCheck).
	Ready      bool
	NoPreCheck bool
	// Reason is why it is not ready: the pre-check's output, trimmed, or
	// why it could not run.
	Reason   string
	ExitCode int
}

// PreCheckTargets lists the pre-checks of a selection: the named routines,
// every enabled routine (by name) when allEnabled, and every pending
// migration with the routine it would run when migrations is set. A
// migration's routine is its spec's routine field, else default_routine;
// the router AI is not asked.
func (p *Pipeline) PreCheckTargets(cfg *config.Config, names []string, allEnabled, migrations bool) ([]PreCheckTarget, error) {
	var out []PreCheckTarget
	for _, n := range names {
		out = append(out, PreCheckTarget{Routine: n})
	}
	if allEnabled {
		ents, err := p.library(cfg).List()
		if err != nil {
			return nil, err
		}
		for _, e := range ents {
			if routine.Enabled(e.Routine, cfg.Routines, cfg.SharedRoutines) {
				out = append(out, PreCheckTarget{Routine: e.Name})
			}
		}
	}
	if migrations {
		migs, err := p.Migrations(cfg)
		if err != nil {
			return nil, err
		}
		for _, m := range migs {
			if !m.Processed {
				out = append(out, PreCheckTarget{Routine: p.migrationRoutine(cfg, m.File), Migration: m.File})
			}
		}
	}
	return out, nil
}

// migrationRoutine is the routine a migration names, else the default.
func (p *Pipeline) migrationRoutine(cfg *config.Config, file string) string {
	full, err := fsutil.ConfinedJoin(p.d.Store.Root(), path.Join(cfg.MigrationsDir, file))
	if err == nil {
		if spec, err := message.ReadHeadFile(full); err == nil && spec.Routine() != "" {
			return spec.Routine()
		}
	}
	if cfg.DefaultRoutine != "" {
		return cfg.DefaultRoutine
	}
	return config.DefaultRoutineName
}

// PreCheck runs each target's pre-check on a worker, one after another,
// and returns the results in order. A routine whose file never mentions
// DECREE_PRE_CHECK is not run (it would do its real work) and counts as
// ready. Nothing a pre-check changes in a replica comes back.
func (p *Pipeline) PreCheck(ctx context.Context, cfg *config.Config, targets []PreCheckTarget) []PreCheckResult {
	// A check waits for busy workers, but not for workers that may never
	// come: after a short grace for one that is (re)connecting, a check no
	// connected worker can run fails at once, saying why.
	wctx, cancel := ctx, context.CancelFunc(func() {})
	if !p.d.FixedWorkers {
		wctx, cancel = context.WithTimeout(ctx, PreCheckWorkerWait)
	}
	_ = p.d.Leases.WaitConnected(wctx) // each check's Unmatched says why when none came
	cancel()
	out := make([]PreCheckResult, 0, len(targets))
	for _, t := range targets {
		res := PreCheckResult{PreCheckTarget: t, ExitCode: -1}
		if err := p.preCheck(ctx, cfg, &res); err != nil {
			res.Ready, res.Reason = false, err.Error()
		}
		out = append(out, res)
	}
	return out
}

func (p *Pipeline) preCheck(ctx context.Context, cfg *config.Config, res *PreCheckResult) error {
	rt, err := p.library(cfg).Resolve(res.Routine)
	if err != nil {
		return err
	}
	if err := rt.Check(); err != nil {
		return err
	}
	has, err := rt.HasPreCheck()
	if err != nil {
		return err
	}
	if !has {
		res.Ready, res.NoPreCheck, res.ExitCode = true, true, 0
		return nil
	}
	need := routineNeeds(cfg, rt)
	if why, _ := p.d.Leases.Unmatched(need); why != "" {
		return fmt.Errorf("no worker can run routine %s: %s; start a decree-worker that can", rt.Name, why)
	}
	ref, err := p.routineRef(rt)
	if err != nil {
		return err
	}
	params := map[string]string{}
	for _, s := range routine.StandardParams {
		params[s] = ""
	}
	if res.Migration != "" {
		params["spec_file"] = path.Join(cfg.MigrationsDir, res.Migration)
	}
	timeout := PreCheckTimeout
	if s := cfg.RoutineSettingsFor(rt.Name, rt.Shared).TimeoutS; s > 0 && time.Duration(s)*time.Second < timeout {
		timeout = time.Duration(s) * time.Second
	}
	a := &lease.Work{
		Kind: lease.WorkPreCheck, Attempt: 1, MaxAttempts: 1,
		Routine: ref, Params: params, NotebookEngine: cfg.NotebookEngine,
		Env: map[string]string{routine.PreCheckEnv: "true"}, Timeout: timeout,
	}
	rs, err := p.prepareReplica(ctx, a)
	if err != nil {
		return err
	}
	defer rs.done()
	need.InPlace = rs.inPlace
	lr, err := p.dispatch(ctx, a, need)
	if err != nil {
		return fmt.Errorf("pre-check of %s: %w", rt.Name, err)
	}
	if lr.Lost {
		return fmt.Errorf("pre-check of %s: worker lost", rt.Name)
	}
	st := lr.Status
	res.ExitCode = int(st.GetExitCode())
	res.Ready = res.ExitCode == 0 && st.GetError() == ""
	if !res.Ready {
		res.Reason = preCheckReason(string(lr.Output), st)
	}
	return nil
}

// preCheckReason turns a failed pre-check's output and status into one
// reason: the output's lines joined with "; ", then what the worker adds
// (a timeout, a signal); "exit N" when both are empty.
func preCheckReason(output string, st *decreev1.ExitStatus) string {
	var parts []string
	for _, line := range strings.Split(output, "\n") {
		if line = strings.TrimSpace(line); line != "" {
			parts = append(parts, line)
		}
	}
	if st.GetTimedOut() {
		parts = append(parts, "timed out")
	}
	if e := st.GetError(); e != "" {
		parts = append(parts, e)
	}
	if len(parts) == 0 {
		return fmt.Sprintf("exit %d", st.GetExitCode())
	}
	return strings.Join(parts, "; ")
}
