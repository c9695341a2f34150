package cli

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	decreev1 "github.com/decreehq/decree/proto/decree/v1"
)

// interrupted ends a command stopped by Ctrl-C (or SIGTERM) while it
// processed messages. An embedded controller is stopped first: the
// routine's whole process group is killed and the attempt under way is
// recorded as interrupted (not failed). Then it says what happened and
// what to do, and exits 130.
func (g *globals) interrupted(s *session, id string) error {
	if s.embedded == nil {
		fmt.Fprintf(g.stderr, "decree: stopped following; %s goes on on the controller (follow it with `decreectl logs -f %s`)\n", id, id)
		return &exitError{code: 130}
	}
	s.close()
	pipe := s.embedded.Pipeline()
	stopped := pipe.Interruptions()
	if len(stopped) == 0 {
		if ids := pipe.RunningIDs(); len(ids) > 0 {
			// The controller gave up waiting for its loop (see
			// controller.Serve): say so rather than "nothing ran".
			list := slices.Sorted(maps.Keys(ids))
			fmt.Fprintf(g.stderr, "decree: interrupted; %s did not stop in time and stays recorded as running. The next `decreectl process` counts its attempt as interrupted, puts the tree back and runs it again; `decreectl cancel %s` drops it.\n", strings.Join(list, ", "), list[0])
			return &exitError{code: 130, msg: "interrupted " + strings.Join(list, ", ")}
		}
		fmt.Fprintln(g.stderr, "decree: interrupted; no attempt was under way. Queued messages stay in .decree/inbox/: run `decreectl process` to process them.")
		return &exitError{code: 130}
	}
	for _, in := range stopped {
		fmt.Fprintf(g.stderr, "decree: interrupted %s (%s) during attempt %d; its routine was stopped.\n", in.MessageID, in.File, in.Attempt)
		if in.Restored {
			fmt.Fprintf(g.stderr, "decree: the tree was put back to where attempt %d started; the interrupted attempt does not count (.decree/runs/%s/ keeps its log).\n", in.Attempt, in.MessageID)
		} else {
			fmt.Fprintf(g.stderr, "decree: the partial changes of attempt %d are still in the working tree; the next controller puts the tree back before it runs the attempt again (.decree/runs/%s/ keeps its log).\n", in.Attempt, in.MessageID)
		}
		fmt.Fprintf(g.stderr, "decree: to resume it (attempt %d runs again): decreectl process\n", in.Attempt)
		fmt.Fprintf(g.stderr, "decree: to drop it, reverting the tree to its checkpoint: decreectl cancel %s\n", in.MessageID)
	}
	ids := make([]string, len(stopped))
	for i, in := range stopped {
		ids[i] = in.MessageID
	}
	return &exitError{code: 130, msg: "interrupted " + strings.Join(ids, ", ")}
}

// followChain follows chain to its end. When this command joined another
// decreectl's controller and that controller goes away before the chain
// finished (its user pressed Ctrl-C), it takes over: it connects again,
// which starts a controller of its own once the project is free, makes the
// chain that controller's work, and goes on following from the last event
// seen (the event log is on disk, so nothing in between is missed). *s is
// replaced by the new session.
func (g *globals) followChain(ctx context.Context, s **session, from uint64, chain string, logs bool) (followResult, error) {
	var total followResult
	for {
		res, err := g.follow(ctx, (*s).client, followSpec{
			from: from, chain: chain, logs: logs,
			done: func(ev *decreev1.Event) bool {
				// A waiting chain pauses: run ends and lists the waits.
				return (ev.GetKind() == decreev1.EventKind_EVENT_KIND_CHAIN_FINISHED || ev.GetKind() == decreev1.EventKind_EVENT_KIND_WAITING) && ev.GetChain() == chain
			},
		})
		total.succeeded += res.succeeded
		total.dead += res.dead
		if res.last != nil {
			total.last = res.last
			from = res.last.GetSequence() + 1
		}
		if err == nil || ctx.Err() != nil || !errors.Is(err, errControllerGone) || (*s).embedded != nil || g.controller != "" {
			return total, err
		}
		fmt.Fprintf(g.stderr, "decree: the controller serving this project stopped before chain %s finished; taking over\n", chain)
		(*s).close()
		ns, err := g.connect(ctx)
		if err != nil {
			return total, err
		}
		*s = ns
		if ns.embedded != nil {
			p := ns.embedded.Pipeline()
			p.Own(chain)
			p.Resume()
			p.Wake()
		}
	}
}
