package engine

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/decreehq/decree/internal/testtool"
	"github.com/decreehq/decree/pkg/usage"
)

// claudeJSON is a stand-in for `claude -p ... --output-format json`: it
// answers like happyAI, wrapped in Claude Code's result object with the
// call's usage and cost.
const claudeJSON = `case "$prompt" in
*"keys fully_completed"*) answer='{"fully_completed": true, "partially_completed": true, "should_retry": false, "warnings": []}' ;;
*"about dogs?"*) answer='{"choices": ["Yes", "No"], "answer": "No", "reasons": ["only cats"]}' ;;
*) answer='{"completed": true, "secs_taken": 1.5, "tokens_used": 10, "comments": ["ok"]}' ;;
esac
n=$(ls "$calls" | wc -l)
python3 -c 'import json,sys; print(json.dumps({"type":"result","subtype":"success","is_error":False,"result":sys.argv[1],"session_id":"sess-tree","total_cost_usd":0.01*int(sys.argv[2]),"usage":{"input_tokens":100,"output_tokens":20,"cache_read_input_tokens":0,"cache_creation_input_tokens":0},"modelUsage":{"claude-sonnet-4-5":{"costUSD":0.01}}}))' "$answer" "$n"`

// TestTreeRecordsClaudeUsage: a tree whose CLI prints Claude's JSON result
// is read through it (the decision follows the wrapped answer), and every
// call's usage lands in DECREE_USAGE_FILE as one line.
func TestTreeRecordsClaudeUsage(t *testing.T) {
	testtool.Require(t, "python3") // writes the stand-in's JSON
	dir0 := t.TempDir()
	tr, dir := setup(t, animals, standIn(t, dir0, claudeJSON), 3)
	runDir := filepath.Join(dir, "run")
	if err := os.MkdirAll(runDir, 0o755); err != nil {
		t.Fatal(err)
	}
	usageFile := filepath.Join(runDir, usage.FileName(1))
	var out bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err := Run(ctx, Options{Tree: tr, Routine: "t", Workdir: dir, RunDir: runDir, Attempt: 1, Output: &out, Grace: time.Second,
		Env: append(os.Environ(), usageEnv+"="+usageFile)})
	if err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	names, _ := calls(t, dir0)
	if joined := strings.Join(names, " "); !strings.Contains(joined, "run-6") || strings.Contains(joined, "run-7") {
		t.Errorf("calls %v: want the No branch (node 6) taken from the wrapped answer", names)
	}
	recs, malformed, _, err := usage.ReadFile(usageFile)
	if err != nil || malformed != 0 {
		t.Fatalf("usage file: %v (%d malformed)", err, malformed)
	}
	if len(recs) != len(names) {
		t.Errorf("%d usage lines for %d CLI calls", len(recs), len(names))
	}
	for _, r := range recs {
		if r.Tool != "claude" || r.SessionID != "sess-tree" || r.InputTokens != 100 || r.Model != "claude-sonnet-4-5" {
			t.Errorf("usage line %+v", r)
		}
	}
}
