package engine

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"github.com/decreehq/decree/pkg/tree"
)

// Ask nodes (tree.KindAsk).
//
// Reached without an answer for it, an ask node writes decree's question
// file (DECREE_ASK_FILE): its text as the question, its route labels as
// the options (a route labelled timed_out is not an option: it is taken
// when no reply comes in time), its timeout metadata as the deadline, and
// the context "tree-node:<id>". The walk ends there, successfully, and the
// message waits. decree gives the next attempt DECREE_REPLY and
// DECREE_ASK_CONTEXT: the walk then starts at that node's route the reply
// names, not at the root, so the work before the question is not done
// again.

// askContextPrefix marks the context of a tree's question.
const askContextPrefix = "tree-node:"

// timedOutLabel is the route an unanswered question takes.
const timedOutLabel = "timed_out"

// envValue returns the last value of key in env.
func envValue(env []string, key string) string {
	v := ""
	for _, kv := range env {
		if val, ok := strings.CutPrefix(kv, key+"="); ok {
			v = val
		}
	}
	return v
}

// resume returns where the walk goes on after a reply to one of the
// tree's questions; false when this attempt does not follow one.
func (r *runner) resume() (*tree.Step, bool, error) {
	id, ok := strings.CutPrefix(envValue(r.o.Env, "DECREE_ASK_CONTEXT"), askContextPrefix)
	reply := envValue(r.o.Env, "DECREE_REPLY")
	if !ok || reply == "" {
		return nil, false, nil
	}
	var s *tree.Step
	for _, st := range r.o.Tree.Steps {
		if st.ID == id && st.Kind == tree.KindAsk {
			s = st
		}
	}
	if s == nil {
		return nil, false, fmt.Errorf("the reply %q answers node %s, which is no longer an ask node of this tree; requeue the message", reply, id)
	}
	route, found := s.Match(reply)
	if !found {
		if reply == timedOutLabel {
			return nil, false, fmt.Errorf("%s: no reply came in time, and the node has no route labelled %s", s.Label(), timedOutLabel)
		}
		return nil, false, fmt.Errorf("%s: the reply %q matches no route; the routes are %s", s.Label(), reply, strings.Join(quote(s.Labels()), ", "))
	}
	r.say("%s: replied %q -> %s", s.Label(), reply, route.To.Label())
	r.add(NodeReport{ID: s.ID, Where: s.Where, Name: s.Text, Type: string(s.Kind), Route: route.Label})
	return route.To, true, nil
}

// ask writes the node's question for decree and ends the walk.
func (r *runner) ask(s *tree.Step) error {
	path := envValue(r.o.Env, "DECREE_ASK_FILE")
	if path == "" {
		return fmt.Errorf("an ask node needs decree to ask a person (DECREE_ASK_FILE is not set)")
	}
	question, err := r.fill(s.Prompt)
	if err != nil {
		return err
	}
	var opts bytes.Buffer
	opts.WriteByte('{')
	n := 0
	for _, rt := range s.Routes {
		if rt.Label == timedOutLabel {
			continue
		}
		if n > 0 {
			opts.WriteByte(',')
		}
		k, _ := json.Marshal(rt.Label)
		v, _ := json.Marshal("continue at " + rt.To.Label())
		opts.Write(k)
		opts.WriteByte(':')
		opts.Write(v)
		n++
	}
	opts.WriteByte('}')
	q := struct {
		Question string          `json:"question"`
		Options  json.RawMessage `json:"options"`
		Timeout  string          `json:"timeout,omitempty"`
		Context  string          `json:"context"`
	}{Question: question, Options: opts.Bytes(), Context: askContextPrefix + s.ID}
	if s.Timeout > 0 {
		q.Timeout = s.Timeout.String()
	}
	data, err := json.Marshal(q)
	if err != nil {
		return err
	}
	if err := os.WriteFile(path, append(data, '\n'), 0o644); err != nil {
		return fmt.Errorf("write the question: %w", err)
	}
	r.say("%s: asked a person; the walk goes on from here after the reply", s.Label())
	r.add(NodeReport{ID: s.ID, Where: s.Where, Name: s.Text, Type: string(s.Kind)})
	return nil
}
