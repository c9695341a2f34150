package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const askChart = `3,Terminator,,,,,,,Start,,,
4,Process,,,,,,,Draft the change,,,
5,Process,,,,,ask,,Ship {{message_id}}?,,,
6,Process,,,,,,,Ship the change,,,
7,Terminator,,,,,,,End,,,
8,Terminator,,,,,,,End,,,
9,Terminator,,,,,,,End,,,
10,Line,,,3,4,,,,,,
11,Line,,,4,5,,,,,,
12,Line,,,5,6,,,yes,,,
13,Line,,,5,7,,,no,,,
14,Line,,,5,8,,,timed_out,,,
15,Line,,,6,9,,,,,,
`

// TestAskNode: an ask node writes decree's question (its text, its route
// labels but timed_out as options, the node as context) and ends the walk;
// after the reply the walk goes on along the chosen route without redoing
// the work before the question; an answer that matches no route fails.
func TestAskNode(t *testing.T) {
	dir0 := t.TempDir()
	tr, dir := setup(t, askChart, standIn(t, dir0, happyAI), 0)
	askFile := filepath.Join(dir, "ask.json")
	walk := func(env ...string) (string, error) {
		var out bytes.Buffer
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		err := Run(ctx, Options{Tree: tr, Routine: "t", Workdir: dir, Params: map[string]string{"message_id": "m-1"},
			Env: append(os.Environ(), env...), Attempt: 1, Output: &out, Grace: time.Second})
		return out.String(), err
	}
	if out, err := walk("DECREE_ASK_FILE=" + askFile); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	var q struct {
		Question string          `json:"question"`
		Options  json.RawMessage `json:"options"`
		Context  string          `json:"context"`
	}
	b, err := os.ReadFile(askFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &q); err != nil {
		t.Fatal(err)
	}
	if q.Question != "Ship m-1?" || q.Context != "tree-node:5" || !strings.HasPrefix(string(q.Options), `{"yes":`) || strings.Contains(string(q.Options), "timed_out") {
		t.Fatalf("question file: %s", b)
	}
	names, _ := calls(t, dir0)
	if strings.Join(names, " ") != "run-4 validate-4" {
		t.Fatalf("calls before the question: %v", names)
	}
	if out, err := walk("DECREE_REPLY=yes", "DECREE_ASK_CONTEXT=tree-node:5"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	names, _ = calls(t, dir0)
	if strings.Join(names, " ") != "run-4 validate-4 run-6 validate-6" {
		t.Errorf("calls after the reply: %v, want only the shipping step", names)
	}
	if out, err := walk("DECREE_REPLY=timed_out", "DECREE_ASK_CONTEXT=tree-node:5"); err != nil {
		t.Errorf("timed_out route: %v\n%s", err, out)
	}
	if _, err := walk("DECREE_REPLY=maybe", "DECREE_ASK_CONTEXT=tree-node:5"); err == nil || !strings.Contains(err.Error(), "matches no route") {
		t.Errorf("unknown reply: %v", err)
	}
	if _, err := walk(); err == nil || !strings.Contains(err.Error(), "DECREE_ASK_FILE") {
		t.Errorf("outside decree: %v", err)
	}
}
