package pipeline

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/decreehq/decree/controller/lease"
	"github.com/decreehq/decree/controller/store"
	"github.com/decreehq/decree/pkg/config"
	"github.com/decreehq/decree/pkg/fsutil"
	"github.com/decreehq/decree/pkg/layout"
	"github.com/decreehq/decree/pkg/message"
	"github.com/decreehq/decree/pkg/routine"
)

// chooseRoutine picks a message's routine: its own routine field, else the
// spec's, else the router's answer, else default_routine ("develop"). A
// routine that cannot be used gives a dead-letter note instead.
func (p *Pipeline) chooseRoutine(ctx context.Context, cfg *config.Config, e store.Entry) (routine.Routine, *store.DeadNote) {
	root := p.d.Store.Root()
	lib := p.library(cfg)
	name := e.Message.Routine()
	explicit := name != ""
	if in := e.Message.InputFile(); in != "" {
		full, err := fsutil.ConfinedJoin(root, in)
		if err != nil {
			return routine.Routine{}, &store.DeadNote{Reason: "InvalidInputFile", MessageID: e.ID,
				Detail: fmt.Sprintf("input_file %q: %v", in, err)}
		}
		spec, err := message.ReadHeadFile(full) // the spec's frontmatter only
		var pe *message.ParseError
		if err != nil && !errors.As(err, &pe) {
			return routine.Routine{}, &store.DeadNote{Reason: "InputFileNotFound", MessageID: e.ID,
				Detail: fmt.Sprintf("input_file %q cannot be read: %v\nCreate the file or fix input_file, then requeue the message.", in, err)}
		}
		if name == "" && err == nil && spec.Routine() != "" {
			name, explicit = spec.Routine(), true
		}
	}
	if name == "" && cfg.Commands.Router != "" {
		name = p.routeByAI(ctx, cfg, lib, e)
	}
	if name == "" {
		name = cfg.DefaultRoutine
	}
	if name == "" {
		name = config.DefaultRoutineName
	}
	rt, err := lib.Resolve(name)
	if err != nil {
		note := routineResolveError(name, err)
		note.MessageID = e.ID
		return routine.Routine{}, &note
	}
	if explicit && !routine.Enabled(rt, cfg.Routines, cfg.SharedRoutines) {
		return routine.Routine{}, &store.DeadNote{Reason: "RoutineDisabled", MessageID: e.ID,
			Detail: fmt.Sprintf("Routine %s is disabled in the registry of .decree/config.yml. Enable it (enabled: true) or name another routine, then requeue the message.", rt.Name)}
	}
	if note := p.checkWorkers(ctx, cfg, rt); note != nil {
		note.MessageID = e.ID
		return routine.Routine{}, note
	}
	if err := rt.Check(); err != nil {
		// No attempt could succeed: dead-letter now rather than fail and
		// revert max_retries times.
		return routine.Routine{}, &store.DeadNote{Reason: "InvalidRoutine", MessageID: e.ID,
			Detail: fmt.Sprintf("%v\nFix the routine file, then requeue the message.", err)}
	}
	return rt, nil
}

// routeByAI asks the router to choose among the enabled routines. Any
// answer that is not an enabled routine counts as no answer.
func (p *Pipeline) routeByAI(ctx context.Context, cfg *config.Config, lib routine.Library, e store.Entry) string {
	entries, err := lib.List()
	if err != nil {
		p.warn(ctx, e.ID, fmt.Sprintf("router: list routines: %v", err))
		return ""
	}
	enabled := map[string]bool{}
	var b strings.Builder
	if guide, err := os.ReadFile(layout.Path(p.d.Store.Root(), layout.RouterGuide)); err == nil {
		b.Write(guide)
		b.WriteString("\n\n")
	}
	b.WriteString("Routines:\n")
	for _, en := range entries {
		if !routine.Enabled(en.Routine, cfg.Routines, cfg.SharedRoutines) {
			continue
		}
		enabled[en.Name] = true
		desc, _ := en.Description()
		fmt.Fprintf(&b, "- %s: %s\n", en.Name, strings.ReplaceAll(strings.TrimSpace(desc), "\n", " "))
	}
	fmt.Fprintf(&b, "\nDefault routine: %s\n\nTask:\n", cfg.DefaultRoutine)
	body, err := p.queuedBody(e)
	if err != nil {
		p.warn(ctx, e.ID, fmt.Sprintf("router: read the message body: %v", err))
		return ""
	}
	b.Write(body)
	if in := e.Message.InputFile(); in != "" {
		fmt.Fprintf(&b, "\n(The task's input file is %s.)\n", in)
	}
	b.WriteString("\n\nAnswer with the routine's name only.\n")
	answer, err := p.askRouter(ctx, cfg, e.ID, b.String())
	if err != nil {
		p.warn(ctx, e.ID, fmt.Sprintf("router failed, using default routine %s: %v", cfg.DefaultRoutine, err))
		return ""
	}
	pick := cleanAnswer(answer)
	if !enabled[pick] {
		p.warn(ctx, e.ID, fmt.Sprintf("router answered %q, which is not an enabled routine; using default routine %s", truncate(answer, 80), cfg.DefaultRoutine))
		return ""
	}
	return pick
}

// askRouter runs commands.router on a worker with prompt on stdin.
func (p *Pipeline) askRouter(ctx context.Context, cfg *config.Config, id, prompt string) (string, error) {
	a := &lease.Work{Kind: lease.WorkRouter, MessageID: id, Attempt: 1,
		Command: cfg.Commands.Router, Stdin: []byte(prompt)}
	// No manifest digest: a replica worker answers from its replica as it
	// is, and nothing it changes comes back.
	res, err := p.dispatch(ctx, a, lease.Requirements{InPlace: p.inPlaceOnly()})
	if err != nil {
		return "", err
	}
	if res.Lost {
		return "", fmt.Errorf("worker lost")
	}
	if c := res.Status.GetExitCode(); c != 0 {
		return "", fmt.Errorf("router command exited %d: %s", c, res.Status.GetError())
	}
	answer, recs := unwrapRouter(string(res.Output))
	p.noteRouterUsage(id, recs)
	return answer, nil
}

// DeriveName asks the router for a kebab-case message name; "" when there
// is no router or its answer is unusable.
func (p *Pipeline) DeriveName(ctx context.Context, cfg *config.Config, body []byte) string {
	if cfg.Commands.Router == "" || len(strings.TrimSpace(string(body))) == 0 {
		return ""
	}
	prompt := "Summarize this task as a kebab-case name under 5 words. Respond with ONLY the name.\n\n" + string(body)
	answer, err := p.askRouter(ctx, cfg, "", prompt)
	if err != nil {
		p.warn(ctx, "", fmt.Sprintf("router could not name the message: %v", err))
		return ""
	}
	line := cleanAnswer(answer)
	if strings.Count(line, "-") > 8 {
		return ""
	}
	return message.KebabName(line)
}

// cleanAnswer takes the first non-empty line of an AI answer, without
// quotes, backticks or trailing punctuation.
func cleanAnswer(s string) string {
	for _, line := range strings.Split(s, "\n") {
		line = strings.Trim(strings.TrimSpace(line), "`'\"*.:! ")
		if line != "" {
			return line
		}
	}
	return ""
}

func truncate(s string, n int) string {
	s = strings.TrimSpace(s)
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}

// routineNeeds is what a worker must offer to run rt.
func routineNeeds(cfg *config.Config, rt routine.Routine) lease.Requirements {
	return lease.Requirements{Driver: rt.Format.Driver(), Labels: cfg.RoutineSettingsFor(rt.Name, rt.Shared).Requires}
}

// checkWorkers dead-letters a routine that none of a fixed set of workers
// can run; with workers free to join it lets the attempt wait.
func (p *Pipeline) checkWorkers(ctx context.Context, cfg *config.Config, rt routine.Routine) *store.DeadNote {
	if !p.d.FixedWorkers {
		return nil
	}
	if err := p.d.Leases.WaitConnected(ctx); err != nil {
		return nil // shutting down; the attempt path reports it
	}
	need := routineNeeds(cfg, rt)
	why, _ := p.d.Leases.Unmatched(need)
	if why == "" {
		return nil
	}
	fix := fmt.Sprintf("Put a decree-driver-%s plugin beside the decree binaries, on PATH or in .decree/drivers/", need.Driver)
	if len(need.Labels) > 0 {
		fix = fmt.Sprintf("Run the message on a controller with a worker that has those labels, or change routines.%s.requires in .decree/config.yml", rt.Name)
	}
	return &store.DeadNote{Reason: "NoCapableWorker",
		Detail: fmt.Sprintf("Routine %s cannot run here: %s.\n%s, then requeue the message.", rt.Name, why, fix)}
}

// routineResolveError explains a routine that cannot be used.
func routineResolveError(name string, err error) store.DeadNote {
	reason := "InvalidRoutine"
	if errors.Is(err, routine.ErrRoutineNotFound) {
		reason = "RoutineNotFound"
	}
	return store.DeadNote{Reason: reason, Detail: fmt.Sprintf("%v\nAdd the routine to .decree/routines/ or name another with `routine:` in the message, then requeue it.", err)}
}
