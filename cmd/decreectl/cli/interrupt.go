package cli

import (
	"fmt"
	"strings"
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
	stopped := s.embedded.Pipeline().Interruptions()
	if len(stopped) == 0 {
		fmt.Fprintln(g.stderr, "decree: interrupted; no attempt was under way. Queued messages stay in .decree/inbox/: run `decreectl process` to process them.")
		return &exitError{code: 130}
	}
	for _, in := range stopped {
		fmt.Fprintf(g.stderr, "decree: interrupted %s (%s) during attempt %d; its routine was stopped.\n", in.MessageID, in.File, in.Attempt)
		fmt.Fprintf(g.stderr, "decree: the partial changes of attempt %d are still in the working tree (.decree/runs/%s/ holds its log).\n", in.Attempt, in.MessageID)
		fmt.Fprintf(g.stderr, "decree: to resume it (attempt %d follows): decreectl process\n", in.Attempt+1)
		fmt.Fprintf(g.stderr, "decree: to drop it, reverting the tree to its checkpoint: decreectl cancel %s\n", in.MessageID)
	}
	ids := make([]string, len(stopped))
	for i, in := range stopped {
		ids[i] = in.MessageID
	}
	return &exitError{code: 130, msg: "interrupted " + strings.Join(ids, ", ")}
}
