package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/decreehq/decree/internal/testtool"
	"github.com/decreehq/decree/pkg/scaffold"
)

// claudeStandIn is a stand-in for Claude Code in print mode with
// --output-format json: it prints the result object the real tool prints,
// with total_cost_usd a running total of its session. A fresh session
// costs $0.25 in attempt 1 and $0.40 otherwise; --resume restores the
// session's saved total (as newer CLI versions do): $0.40 in all. COST
// overrides the cost of a fresh session.
const claudeStandIn = `session="sess-${DECREE_ATTEMPT}-$$" cost="${COST:-0.4}" out=70 model=claude-sonnet-4-5-20250929
[ "$DECREE_ATTEMPT" = 1 ] && [ -z "${COST:-}" ] && cost=0.25 out=50
while [ $# -gt 0 ]; do
  case "$1" in
    --resume) session="$2"; cost=0.4; out=120; shift ;;
    --model) [ -n "$2" ] && model="$2"; shift ;;
  esac
  shift
done
printf '{"type":"result","subtype":"success","is_error":false,"duration_ms":1200,"duration_api_ms":1100,"num_turns":2,"result":"done","session_id":"%s","total_cost_usd":%s,"usage":{"input_tokens":10,"cache_creation_input_tokens":100,"cache_read_input_tokens":1000,"output_tokens":%s,"service_tier":"standard"},"modelUsage":{"%s":{"inputTokens":10,"outputTokens":%s,"cacheReadInputTokens":1000,"cacheCreationInputTokens":100,"webSearchRequests":0,"costUSD":%s,"contextWindow":200000}},"permission_denials":[]}\n' \
  "$session" "$cost" "$out" "$model" "$out" "$cost"`

type costJSON struct {
	Usage *struct {
		CostUSD      float64 `json:"cost_usd"`
		OutputTokens int64   `json:"output_tokens"`
		Calls        int     `json:"calls"`
	} `json:"usage"`
	MaxCostUSD float64 `json:"max_cost_usd"`
	Details    []struct {
		Error string `json:"error"`
		Usage *struct {
			CostUSD float64 `json:"cost_usd"`
		} `json:"usage"`
	} `json:"attempt_details"`
}

// TestBudgetStopsRetries: a routine escalates its model through the
// attempts list and records what each Claude call cost through `decreectl
// usage record`, a resumed process included; the routine's budget stops
// the message after its third of five attempts (BudgetExceeded, the tree
// reverted), the totals are exact, and runs shows them.
func TestBudgetStopsRetries(t *testing.T) {
	t.Parallel()
	p := newProject(t, binary, "default_routine: costly\nroutines:\n  costly:\n    max_cost_usd: 1\n    attempts: [haiku, sonnet, opus, opus, opus]\n")
	claude := p.script("claude", claudeStandIn)
	trace := filepath.Join(t.TempDir(), "trace.txt")
	ctl := bin(t, "decreectl")
	p.routine("costly", "", `echo "attempt=$DECREE_ATTEMPT value=${DECREE_ATTEMPT_VALUE:-} values=${DECREE_ATTEMPT_VALUES:-} final=$DECREE_FINAL_ATTEMPT budget=${DECREE_BUDGET_USD:-}" >> `+trace+`
case "$DECREE_USAGE_FILE" in /*) ;; *) echo "DECREE_USAGE_FILE is not absolute: $DECREE_USAGE_FILE"; exit 3 ;; esac
`+claude+` -p "implement $message_file" --model "$DECREE_ATTEMPT_VALUE" --output-format json | `+ctl+` usage record --from claude-json --tee
if [ "$DECREE_ATTEMPT" = 1 ]; then
  session=$(sed -n 's/.*"session_id":"\([^"]*\)".*/\1/p' "$DECREE_USAGE_FILE")
  (cd / && `+claude+` -p "check" --resume "$session" --output-format json | `+ctl+` usage record --from claude-json)
fi
echo "work $DECREE_ATTEMPT" > work.txt
exit 1`)
	r := p.ctl("", "run", "-m", "costly", "-p", "x")
	mustCode(t, r, 1)
	id := p.onlyRun()
	rj := p.runJSON(id)
	if rj.Outcome != "dead_lettered" || rj.Attempts != 3 || rj.MaxAttempts != 5 {
		t.Fatalf("run.json: %s after %d of %d attempts, want dead_lettered after 3 of 5\n%s", rj.Outcome, rj.Attempts, rj.MaxAttempts, r)
	}
	var cj costJSON
	if err := json.Unmarshal([]byte(p.read(".decree/runs/"+id+"/run.json")), &cj); err != nil {
		t.Fatal(err)
	}
	if cj.Usage == nil || cj.Usage.CostUSD != 1.2 || cj.Usage.Calls != 4 || cj.Usage.OutputTokens != 120+70+70 || cj.MaxCostUSD != 1 {
		t.Errorf("run.json usage %+v budget %v: want $1.20 in 4 calls, 260 output tokens, budget 1", cj.Usage, cj.MaxCostUSD)
	}
	for i, d := range cj.Details {
		if d.Usage == nil || d.Usage.CostUSD != 0.4 {
			t.Errorf("attempt %d usage %+v, want $0.40", i+1, d.Usage)
		}
	}
	if n := len(cj.Details); n == 3 && !strings.Contains(cj.Details[2].Error, "over budget") {
		t.Errorf("attempt 3 error %q", cj.Details[2].Error)
	}
	contains(t, "dead note", p.read(".decree/inbox/dead/costly.md.dead.txt"), "BudgetExceeded")
	contains(t, "dead note", p.read(".decree/inbox/dead/costly.md.dead.txt"), "cost $1.2000, more than its budget of $1.0000")
	b, err := os.ReadFile(trace)
	if err != nil {
		t.Fatal(err)
	}
	got := string(b)
	want := "attempt=1 value=haiku values=haiku,sonnet,opus,opus,opus final=false budget=1\n" +
		"attempt=2 value=sonnet values=haiku,sonnet,opus,opus,opus final=false budget=0.6\n" +
		"attempt=3 value=opus values=haiku,sonnet,opus,opus,opus final=false budget=0.2\n"
	if got != want {
		t.Errorf("the attempts saw:\n%s\nwant:\n%s", got, want)
	}
	if p.exists("work.txt") {
		t.Error("the tree was not reverted")
	}
	runs := p.ctl("", "runs")
	mustCode(t, runs, 0)
	contains(t, "runs", runs.stdout, "$1.2000 of $1.0000")
	js := p.ctl("", "-o", "json", "runs")
	var listed struct {
		Runs []struct {
			Usage struct {
				CostUSD float64 `json:"costUsd"`
			} `json:"usage"`
			MaxCostUSD float64 `json:"maxCostUsd"`
		} `json:"runs"`
	}
	if err := json.Unmarshal([]byte(js.stdout), &listed); err != nil || len(listed.Runs) != 1 || listed.Runs[0].Usage.CostUSD != 1.2 || listed.Runs[0].MaxCostUSD != 1 {
		t.Errorf("runs -o json: %+v, %v\n%s", listed, err, js.stdout)
	}
}

// TestBudgetStopsRunningAttempt: an in-place attempt whose message goes
// over its own budget (frontmatter max_cost_usd) is stopped while it
// runs, not when it ends.
func TestBudgetStopsRunningAttempt(t *testing.T) {
	t.Parallel()
	p := newProject(t, inProcess, "max_retries: 3\ndefault_routine: slow\n")
	claude := p.script("claude", claudeStandIn)
	p.routine("slow", "", `COST=2 `+claude+` -p x | `+bin(t, "decreectl")+` usage record --from claude-json
sleep 120
echo never > never.txt`)
	p.write(".decree/inbox/pricy.md", "---\nmax_cost_usd: 0.5\n---\nDo it.\n")
	start := time.Now()
	r := p.ctl("", "process")
	mustCode(t, r, 1)
	if took := time.Since(start); took > 90*time.Second {
		t.Errorf("took %s: the attempt was not stopped while it ran", took)
	}
	rj := p.runJSON(p.onlyRun())
	if rj.Attempts != 1 || len(rj.Details) != 1 || !strings.Contains(rj.Details[0].Error, "stopped over budget: the message's AI calls cost $2.0000, more than its max_cost_usd of $0.5000") {
		t.Errorf("run.json %+v", rj)
	}
	contains(t, "dead note", p.read(".decree/inbox/dead/pricy.md.dead.txt"), "BudgetExceeded")
	if p.exists("never.txt") {
		t.Error("the routine went on after it was stopped")
	}
}

// TestStatusShowsCostSoFar: while an attempt runs, status (over the
// running command's socket) shows what the message has cost so far.
func TestStatusShowsCostSoFar(t *testing.T) {
	t.Parallel()
	p := newProject(t, binary, "max_retries: 1\ndefault_routine: waits\n")
	claude := p.script("claude", claudeStandIn)
	release := filepath.Join(t.TempDir(), "release")
	p.routine("waits", "", claude+` -p x | `+bin(t, "decreectl")+` usage record --from claude-json
while [ ! -e `+release+` ]; do sleep 0.05; done`)
	run := start(t, p.dir, "decreectl", "-C", p.dir, "run", "-m", "waits", "-p", "x")
	var last string
	testtool.WaitFor(t, 60*time.Second, "status to show the cost so far", func() bool {
		r := p.ctl("", "status")
		last = r.stdout
		return strings.Contains(r.stdout, "attempt 1), $0.2500 so far")
	})
	js := p.ctl("", "-o", "json", "status")
	var st struct {
		RunningUsage struct {
			CostUSD float64 `json:"costUsd"`
			Calls   int     `json:"calls"`
		} `json:"runningUsage"`
	}
	if err := json.Unmarshal([]byte(js.stdout), &st); err != nil || st.RunningUsage.CostUSD != 0.25 || st.RunningUsage.Calls != 1 {
		t.Errorf("status -o json: %+v, %v\n%s", st, err, js.stdout)
	}
	if err := os.WriteFile(release, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if code := run.Wait(t, 60*time.Second); code != 0 {
		t.Errorf("run exited %d\n%s\nlast status:\n%s", code, run.Out, last)
	}
}

// TestUsageTotalsAllTools: stand-ins print what Claude, Codex and Gemini
// print in their JSON modes; the first attempt records one Claude call,
// then its second call stops at a usage limit without a result; the retry
// records Codex and Gemini, priced from the table, and a malformed line.
// run.json has each attempt's cost and the exact total; the malformed
// line is noted in the attempt's log.
func TestUsageTotalsAllTools(t *testing.T) {
	t.Parallel()
	p := newProject(t, binary, "max_retries: 1\ndefault_routine: mixed\n")
	fixtures, err := filepath.Abs("../pkg/usage/testdata")
	if err != nil {
		t.Fatal(err)
	}
	claude := p.script("claude", `if [ -e "$DECREE_USAGE_FILE" ]; then echo "Claude AI usage limit reached|$(( $(date +%s) + 1 ))"; exit 1; fi
cat `+fixtures+`/claude-result.json`)
	codex := p.script("codex", "cat "+fixtures+"/codex-exec.jsonl")
	gemini := p.script("gemini", "cat "+fixtures+"/gemini.json")
	ctl := bin(t, "decreectl")
	p.routine("mixed", "", `if [ "$DECREE_ATTEMPT" = 1 ]; then
  `+claude+` -p x --output-format json | `+ctl+` usage record --from claude-json --tee
  `+claude+` -p y --output-format json | `+ctl+` usage record --from claude-json --tee
  exit 0
fi
`+codex+` exec --json x | `+ctl+` usage record --from codex-json --model gpt-5-codex
`+gemini+` -p x --output-format json | `+ctl+` usage record --from gemini-json
echo '{"tool":"broken"' >> "$DECREE_USAGE_FILE"`)
	r := p.ctl("", "run", "-m", "mixed", "-p", "x")
	mustCode(t, r, 0)
	id := p.onlyRun()
	var cj struct {
		Attempts int `json:"attempts"`
		Usage    struct {
			CostUSD      float64 `json:"cost_usd"`
			EstimatedUSD float64 `json:"estimated_cost_usd"`
			Calls        int     `json:"calls"`
			Malformed    int     `json:"malformed_lines"`
		} `json:"usage"`
		Details []struct {
			Usage struct {
				CostUSD float64 `json:"cost_usd"`
			} `json:"usage"`
		} `json:"attempt_details"`
	}
	if err := json.Unmarshal([]byte(p.read(".decree/runs/"+id+"/run.json")), &cj); err != nil {
		t.Fatal(err)
	}
	if cj.Attempts != 2 || len(cj.Details) != 2 || cj.Details[0].Usage.CostUSD != 0.1234 || cj.Details[1].Usage.CostUSD != 0.039213 {
		t.Fatalf("run.json: %+v\n%s", cj, r)
	}
	if cj.Usage.CostUSD != 0.162613 || cj.Usage.EstimatedUSD != 0.039213 || cj.Usage.Calls != 5 || cj.Usage.Malformed != 1 {
		t.Errorf("run.json usage %+v: want $0.162613 ($0.039213 estimated) in 5 calls, 1 malformed line", cj.Usage)
	}
	contains(t, "attempt 2's log", p.read(".decree/runs/"+id+"/routine.try-002.log"), "decree: usage line 5 skipped")
}

// TestBundledRoutineRecordsCost: the develop routine `init` writes for
// claude records what each call cost through the real decreectl on PATH
// and passes the attempt's model; a stand-in claude prints the real JSON
// result for the session it is given.
func TestBundledRoutineRecordsCost(t *testing.T) {
	dir := t.TempDir()
	if d, err := filepath.EvalSymlinks(dir); err == nil {
		dir = d
	}
	if _, err := scaffold.Init(dir, scaffold.Options{Tool: "claude"}); err != nil {
		t.Fatal(err)
	}
	p := &project{t: t, dir: dir, mode: binary}
	cfg := p.read(".decree/config.yml")
	if !strings.Contains(cfg, "  develop:\n    enabled: true\n") {
		t.Fatalf("config.yml of init:\n%s", cfg)
	}
	p.write(".decree/config.yml", strings.Replace(cfg, "  develop:\n    enabled: true\n", "  develop:\n    enabled: true\n    attempts: [claude-opus-4-5]\n", 1))
	stand := t.TempDir()
	calls := filepath.Join(t.TempDir(), "calls")
	// Written and closed before anything runs, and no parallel test is
	// forking meanwhile (this test is not parallel): no ETXTBSY.
	if err := os.WriteFile(filepath.Join(stand, "claude"), []byte(`#!/usr/bin/env bash
echo "$*" >> `+calls+`
session=none
while [ $# -gt 0 ]; do [ "$1" = --session-id ] && session="$2"; shift; done
printf '{"type":"result","subtype":"success","is_error":false,"num_turns":3,"result":"ok","session_id":"%s","total_cost_usd":0.1234,"usage":{"input_tokens":24,"cache_creation_input_tokens":8120,"cache_read_input_tokens":90211,"output_tokens":2210},"modelUsage":{"claude-opus-4-5-20251101":{"inputTokens":24,"outputTokens":2210,"costUSD":0.1234}}}\n' "$session"
`), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", stand+string(os.PathListSeparator)+filepath.Dir(bin(t, "decreectl"))+string(os.PathListSeparator)+os.Getenv("PATH"))
	r := p.ctl("", "run", "-m", "feature", "-p", "add a feature", "-v", "routine=develop")
	mustCode(t, r, 0)
	var cj costJSON
	if err := json.Unmarshal([]byte(p.read(".decree/runs/"+p.onlyRun()+"/run.json")), &cj); err != nil {
		t.Fatal(err)
	}
	if cj.Usage == nil || cj.Usage.CostUSD != 0.2468 || cj.Usage.Calls != 2 {
		t.Errorf("run.json usage %+v, want $0.2468 in 2 calls (two sessions)\n%s", cj.Usage, r)
	}
	b, _ := os.ReadFile(calls)
	for _, c := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if !strings.Contains(c, "--model claude-opus-4-5") || !strings.Contains(c, "--output-format json") {
			t.Errorf("call %q", c)
		}
	}
}

// TestReplicaWorkerUsage: a worker in a replica workspace (real separate
// controller and worker processes) returns the attempt's usage file with
// the run files; the controller sums it, and a successful attempt that
// went over the routine's budget (it could not be watched while it ran)
// dead-letters the message.
func TestReplicaWorkerUsage(t *testing.T) {
	t.Parallel()
	p := newProject(t, binary, "max_retries: 3\ndefault_routine: costly\nroutines:\n  costly:\n    max_cost_usd: 0.2\n")
	claude := p.script("claude", claudeStandIn)
	p.routine("costly", "", claude+` -p x | `+bin(t, "decreectl")+` usage record --from claude-json
echo done > done.txt`)
	startController(t, p)
	ws := t.TempDir()
	start(t, ws, "decree-worker", "--controller", "unix://"+p.path(".decree/decree.sock"), "--workspace", ws, "--id", "replica-1")
	r := p.ctl("", "run", "-m", "costly", "-p", "x")
	mustCode(t, r, 1)
	id := p.onlyRun()
	var cj costJSON
	if err := json.Unmarshal([]byte(p.read(".decree/runs/"+id+"/run.json")), &cj); err != nil {
		t.Fatal(err)
	}
	if cj.Usage == nil || cj.Usage.CostUSD != 0.25 || len(cj.Details) != 1 || !strings.Contains(cj.Details[0].Error, "over budget") {
		t.Errorf("run.json: usage %+v, attempts %+v\n%s", cj.Usage, cj.Details, r)
	}
	if !p.exists(".decree/runs/" + id + "/usage.try-001.jsonl") {
		t.Error("the replica's usage file did not reach the run directory")
	}
	contains(t, "dead note", p.read(".decree/inbox/dead/costly.md.dead.txt"), "BudgetExceeded")
	if p.exists("done.txt") {
		t.Error("the over-budget attempt's change was kept")
	}
}

// TestRouterUsageCounts: a router in Claude's JSON mode is read through
// its result object (it picks the routine), and the call's cost counts in
// the message's run.json with its first attempt.
func TestRouterUsageCounts(t *testing.T) {
	testtool.Require(t, "bash")
	t.Parallel()
	p := newProject(t, binary, "")
	router := p.script("claude-json", `cat >/dev/null
printf '%s\n' '{"type":"result","subtype":"success","is_error":false,"result":"review","session_id":"sess-router","total_cost_usd":0.05,"usage":{"input_tokens":300,"output_tokens":2,"cache_read_input_tokens":0,"cache_creation_input_tokens":0},"modelUsage":{"claude-haiku-4-5":{"costUSD":0.05}}}'`)
	p.write(".decree/config.yml", fmt.Sprintf("commands:\n  router: %q\ndefault_routine: develop\n", router))
	p.routine("develop", "", `echo develop ran > ran.txt`)
	p.routine("review", "", `echo review ran > ran.txt`)
	mustCode(t, p.ctl("", "run", "-m", "pick", "-p", "please review this"), 0)
	contains(t, "ran.txt", p.read("ran.txt"), "review ran")
	id := p.onlyRun()
	var rec struct {
		Usage *struct {
			CostUSD float64 `json:"cost_usd"`
			Calls   int     `json:"calls"`
		} `json:"usage"`
	}
	if err := json.Unmarshal([]byte(p.read(".decree/runs/"+id+"/run.json")), &rec); err != nil {
		t.Fatal(err)
	}
	if rec.Usage == nil || rec.Usage.CostUSD != 0.05 || rec.Usage.Calls != 1 {
		t.Errorf("run.json usage = %+v, want the router's $0.05 in one call", rec.Usage)
	}
}

// TestSubmitRefusesBadBudget: a max_cost_usd that is not an amount is
// refused when the message is submitted, before anything is queued.
func TestSubmitRefusesBadBudget(t *testing.T) {
	testtool.Require(t, "bash")
	t.Parallel()
	p := newProject(t, binary, baseConfig)
	p.routine("develop", "", `echo ran > ran.txt`)
	r := p.ctl("", "run", "-m", "x", "-p", "x", "-v", "max_cost_usd=lots")
	if r.code == 0 {
		t.Fatalf("a bad budget was accepted:\n%s", r)
	}
	contains(t, "run", r.stderr, "max_cost_usd")
	if q := p.messages(".decree/inbox"); len(q) != 0 || p.exists("ran.txt") {
		t.Errorf("inbox %v, ran %v: want nothing queued or run", q, p.exists("ran.txt"))
	}
}
