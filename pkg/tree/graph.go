package tree

import (
	"fmt"
	"slices"
	"strings"
)

// checkRoutes rejects duplicate labels, and unlabeled lines out of a
// decision.
func checkRoutes(s *Step, ps *problems) {
	seen := map[string]*Line{}
	for _, r := range s.Routes {
		key := strings.ToLower(strings.TrimSpace(r.Label))
		if (s.Kind == KindDecision || s.Kind == KindAsk) && key == "" {
			ps.add(s.Label(), "%s has no label; each line out of a decision needs the answer it stands for (Yes, No, ...)", lineLabel(r.Line))
			continue
		}
		if prev, dup := seen[key]; dup {
			ps.add(s.Label(), "%s and %s both have the route label %q; labels out of one node must differ", lineLabel(prev), lineLabel(r.Line), r.Label)
			continue
		}
		seen[key] = r.Line
	}
}

// checkCycles reports each cycle once, as the path of node ids.
func checkCycles(t *Tree, ps *problems) {
	const (
		white = iota
		grey
		black
	)
	color := map[*Step]int{}
	var stack []*Step
	var visit func(s *Step)
	visit = func(s *Step) {
		color[s] = grey
		stack = append(stack, s)
		for _, r := range s.Routes {
			switch color[r.To] {
			case grey:
				i := slices.Index(stack, r.To)
				var path []string
				for _, c := range stack[i:] {
					path = append(path, fmt.Sprintf("%s (%s)", c.ID, c.Where))
				}
				path = append(path, r.To.ID)
				ps.add(r.To.Label(), "the lines form a cycle: %s; a tree must not loop back (decree retries failed attempts itself)", strings.Join(path, " -> "))
			case white:
				visit(r.To)
			}
		}
		stack = stack[:len(stack)-1]
		color[s] = black
	}
	for _, s := range t.Steps {
		if color[s] == white {
			visit(s)
		}
	}
}

// findRoot picks the Start terminator, else the one node without incoming
// lines.
func findRoot(t *Tree, ps *problems) *Step {
	var starts, orphans []*Step
	for _, s := range t.Steps {
		if s.Kind == KindStart {
			starts = append(starts, s)
		}
		if len(s.In) == 0 {
			orphans = append(orphans, s)
		}
	}
	names := func(ss []*Step) string {
		var out []string
		for _, s := range ss {
			out = append(out, s.Label())
		}
		return strings.Join(out, ", ")
	}
	switch {
	case len(starts) == 1:
		return starts[0]
	case len(starts) > 1:
		ps.add("", "several Start terminators: %s; keep one", names(starts))
	case len(orphans) == 1:
		return orphans[0]
	case len(orphans) > 1:
		ps.add("", "the start is ambiguous: %d nodes have no incoming line: %s; add a Start terminator linked to the first step, or connect the others", len(orphans), names(orphans))
	default:
		ps.add("", "every node has an incoming line, so there is no start; add a Start terminator")
	}
	return nil
}
