package pipeline

import (
	"context"
	"fmt"
	"strconv"

	"github.com/decreehq/decree/controller/events"
	"github.com/decreehq/decree/controller/lease"
	"github.com/decreehq/decree/controller/store"
	"github.com/decreehq/decree/pkg/config"
)

// hookName returns the routine configured for a hook point.
func hookName(cfg *config.Config, hook string) string {
	switch hook {
	case "beforeAll":
		return cfg.Hooks.BeforeAll
	case "afterAll":
		return cfg.Hooks.AfterAll
	case "beforeEach":
		return cfg.Hooks.BeforeEach
	case "afterEach":
		return cfg.Hooks.AfterEach
	case "onDeadLetter":
		return cfg.Hooks.OnDeadLetter
	case "onWait":
		return cfg.Hooks.OnWait
	case "beforeMerge":
		return cfg.Hooks.BeforeMerge
	case "afterMerge":
		return cfg.Hooks.AfterMerge
	}
	return ""
}

// runMessageHook runs a per-message hook (beforeEach, afterEach,
// onDeadLetter) and returns "" on success or why it failed. Hooks bypass
// the routine registry: the file only has to exist.
func (p *Pipeline) runMessageHook(ctx context.Context, cfg *config.Config, e store.Entry, run *store.Run, hook string, attempt, exitCode int, final bool) string {
	name := hookName(cfg, hook)
	if name == "" {
		return ""
	}
	max := run.State().MaxAttempts
	env := map[string]string{
		"DECREE_HOOK":         hook,
		"DECREE_TRIGGER":      trigger(e),
		"DECREE_ATTEMPT":      strconv.Itoa(attempt),
		"DECREE_MAX_ATTEMPTS": strconv.Itoa(max),
		"DECREE_MAX_RETRIES":  strconv.Itoa(max),
	}
	if hook == "afterEach" || hook == "onDeadLetter" {
		env["DECREE_ROUTINE_EXIT_CODE"] = strconv.Itoa(exitCode)
	}
	if hook == "afterEach" {
		env["DECREE_FINAL_ATTEMPT"] = strconv.FormatBool(final)
	}
	return p.runHook(ctx, cfg, hook, name, &e, run, env, attempt)
}

// runBatchHook runs beforeAll or afterAll; a failure is a warning.
func (p *Pipeline) runBatchHook(ctx context.Context, cfg *config.Config, hook string) {
	name := hookName(cfg, hook)
	if name == "" {
		return
	}
	env := map[string]string{"DECREE_HOOK": hook, "DECREE_TRIGGER": "inbox"}
	if msg := p.runHook(ctx, cfg, hook, name, nil, nil, env, 0); msg != "" {
		p.warn(ctx, "", fmt.Sprintf("%s hook failed: %s", hook, msg))
	}
}

func (p *Pipeline) runHook(ctx context.Context, cfg *config.Config, hook, name string, e *store.Entry, run *store.Run, env map[string]string, attempt int) string {
	rt, err := p.library(cfg).Resolve(name)
	if err != nil {
		return fmt.Sprintf("hook %s (%s): %v", hook, name, err)
	}
	ref, err := p.routineRef(rt)
	if err != nil {
		return err.Error()
	}
	a := &lease.Work{Kind: lease.WorkHook, Routine: ref, Env: env, Attempt: attempt}
	id, chain := "", ""
	if e != nil {
		params, err := p.params(*e, rt)
		if err != nil {
			return err.Error()
		}
		a.Params, a.MessageID, a.MessageDir = params, e.ID, params["message_dir"]
		id, chain = e.ID, e.Chain
	}
	rs, err := p.prepareReplica(ctx, a)
	if err != nil {
		return err.Error()
	}
	defer rs.done()
	res, err := p.dispatch(ctx, a, rs.requirements(lease.Requirements{Driver: rt.Format.Driver()}))
	if aerr := p.applyReplica(ctx, rs, e, run, res); aerr != nil && err == nil {
		err = aerr
	}
	var msg string
	code := int32(res.Status.GetExitCode())
	switch {
	case err != nil:
		msg, code = err.Error(), -1
	case res.Lost:
		msg, code = "worker lost", -1
	case code != 0:
		msg = fmt.Sprintf("%s exited %d %s", name, code, res.Status.GetError())
	}
	p.emit(ctx, &events.Event{Kind: events.HookFinished, MessageID: id, Chain: chain,
		Attempt: attempt, ExitCode: int(code), Text: hook + " (" + name + ")"})
	return msg
}
