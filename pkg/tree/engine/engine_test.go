package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/decreehq/decree/pkg/config"
	"github.com/decreehq/decree/pkg/tree"
)

// standIn writes a bash stand-in for an AI CLI: it records every prompt
// it gets as calls/NNN-STEP-NODE.txt (STEP is run, validate or retry) and
// then runs body, which answers on stdout. $1 is the prompt.
func standIn(t *testing.T, dir, body string) string {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(dir, "calls"), 0o755); err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(dir, "ai.sh")
	src := `#!/usr/bin/env bash
# A stand-in for an AI CLI, written by the engine tests.
calls="` + filepath.Join(dir, "calls") + `"
n=$(ls "$calls" | wc -l)
printf '%s' "$1" > "$calls/$(printf %03d "$n")-$DECREE_TREE_STEP-$DECREE_TREE_NODE.txt"
prompt="$1"
` + body + "\n"
	if err := os.WriteFile(script, []byte(src), 0o755); err != nil {
		t.Fatal(err)
	}
	return script
}

// calls returns the recorded prompts in order, as "STEP-NODE" -> prompt
// pairs.
func calls(t *testing.T, dir string) (names []string, prompts []string) {
	t.Helper()
	ents, err := os.ReadDir(filepath.Join(dir, "calls"))
	if err != nil {
		t.Fatal(err)
	}
	sort.Slice(ents, func(i, j int) bool { return ents[i].Name() < ents[j].Name() })
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(dir, "calls", e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, strings.TrimSuffix(e.Name()[4:], ".txt"))
		prompts = append(prompts, string(b))
	}
	return names, prompts
}

const csvHeader = "Id,Name,Shape Library,Page ID,Line Source,Line Destination,Tags,Status,Text Area 1,Comments,timeout,validate_prompt\n1,Document,,,,,,,Test chart,,,\n2,Page,,,,,,,Page 1,,,\n"

// setup compiles a chart whose CLIs all run the stand-in (AI with
// argument "main", RETRY with "retry").
func setup(t *testing.T, rows string, script string, retries int) (*tree.Tree, string) {
	t.Helper()
	dir := t.TempDir()
	set := config.Default().Tree
	set.CLIs = map[string]string{"AI": "bash " + script + " <prompt>", "RETRY": "DECREE_RETRY=1 bash " + script + " '<prompt>'"}
	set.DefaultCLI, set.ValidateCLI, set.RetryCLI, set.RetryCount = "AI", "AI", "RETRY", retries
	doc, err := tree.Parse("t.tree.csv", []byte(csvHeader+rows))
	if err != nil {
		t.Fatal(err)
	}
	tr, err := tree.Compile(doc, set)
	if err != nil {
		t.Fatal(err)
	}
	return tr, dir
}

func run(t *testing.T, tr *tree.Tree, dir string, params map[string]string) (string, Report, error) {
	t.Helper()
	runDir := filepath.Join(dir, "run")
	if err := os.MkdirAll(runDir, 0o755); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err := Run(ctx, Options{Tree: tr, Routine: "t", Workdir: dir, Params: params, RunDir: runDir, Attempt: 1, Output: &out, Grace: time.Second})
	var rep Report
	b, rerr := os.ReadFile(filepath.Join(runDir, ReportFile))
	if rerr != nil {
		t.Fatal(rerr)
	}
	if jerr := json.Unmarshal(b, &rep); jerr != nil {
		t.Fatal(jerr)
	}
	return out.String(), rep, err
}

const animals = `3,Terminator,,,,,,,Start,,,
4,Process,,,,,,,Create three animal files,,,
5,Decision,,,,,,,Are any of the files about dogs?,,,
6,Process,,,,,,,Create a file about dogs,,,
7,Terminator,,,,,,,End,,,
8,Terminator,,,,,,,End,,,
9,Line,,,5,7,,,Yes,,,
10,Line,,,5,6,,,No,,,
11,Line,,,4,5,,,,,,
12,Line,,,3,4,,,,,,
13,Line,,,6,8,,,,,,
`

// answers: validations pass, the decision says No inside a fence with
// chatter around it, process steps chatter and then answer.
const happyAI = `case "$prompt" in
*"keys fully_completed"*) echo '{"fully_completed": true, "partially_completed": true, "should_retry": false, "warnings": []}' ;;
*"about dogs?"*) printf 'Let me look.\n` + "```json" + `\n{"choices": ["Yes", "No"], "answer": "No", "reasons": ["only cats"]}\n` + "```" + `\nDone.\n' ;;
*) echo "working on it {not json}"; echo '{"completed": true, "secs_taken": 1.5, "tokens_used": 10, "comments": ["ok"]}' ;;
esac`

// TestDecisionFollowsAnswer: Start and End are never sent to the CLI, the
// decision prompt names the routes, the answer picks the branch, and
// tree.json / tree.log record the run.
func TestDecisionFollowsAnswer(t *testing.T) {
	dir0 := t.TempDir()
	tr, dir := setup(t, animals, standIn(t, dir0, happyAI), 3)
	out, rep, err := run(t, tr, dir, nil)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	names, prompts := calls(t, dir0)
	want := []string{"run-4", "validate-4", "run-5", "run-6", "validate-6"}
	if strings.Join(names, " ") != strings.Join(want, " ") {
		t.Fatalf("calls %v, want %v", names, want)
	}
	if !strings.Contains(prompts[2], `choosing exactly one of: "Yes", "No"`) || !strings.Contains(prompts[2], "answer (string") {
		t.Errorf("decision prompt does not list the routes:\n%s", prompts[2])
	}
	if !strings.HasPrefix(prompts[0], "Create three animal files\n\n") || !strings.Contains(prompts[0], "completed (boolean") {
		t.Errorf("process prompt:\n%s", prompts[0])
	}
	if !strings.Contains(prompts[1], "Create three animal files") || !strings.Contains(prompts[1], `"completed": true`) || !strings.Contains(prompts[1], tree.DefaultValidatePrompt) {
		t.Errorf("validation prompt lacks the task, the answer or the default prompt:\n%s", prompts[1])
	}
	var got []string
	for _, n := range rep.Nodes {
		got = append(got, n.Type+":"+n.ID+":"+n.Route)
	}
	if strings.Join(got, " ") != "start:3: process:4: decision:5:No process:6: end:8:" || rep.Status != "succeeded" || rep.Chart != "Test chart" {
		t.Errorf("report: status %s, nodes %v", rep.Status, got)
	}
	if !strings.Contains(out, `answered "No" -> node 6`) || !strings.Contains(out, "working on it") {
		t.Errorf("live output lacks the route or the CLI's output:\n%s", out)
	}
	log, _ := os.ReadFile(filepath.Join(dir, "run", LogFile))
	if !strings.Contains(string(log), "--- prompt\nCreate a file about dogs") || !strings.Contains(string(log), "only cats") {
		t.Errorf("tree.log lacks prompts or outputs:\n%s", log)
	}
}

const oneStep = "3,Process,,,,,,,Write the report,,,\n"

// TestValidationRetriesWithCritiques: a failed validation is retried
// through the retry CLI with every earlier critique in the prompt.
func TestValidationRetriesWithCritiques(t *testing.T) {
	dir0 := t.TempDir()
	script := standIn(t, dir0, `n=$(ls "$calls" | wc -l)
case "$prompt" in
*"keys fully_completed"*)
  if [ "$n" -le 4 ]; then echo '{"fully_completed": false, "should_retry": true, "warnings": ["critique number '$n'"]}'
  else echo '{"fully_completed": true}'; fi ;;
*) [ -n "$DECREE_RETRY" ] && echo "(retry CLI)"; echo '{"completed": true}' ;;
esac`)
	tr, dir := setup(t, oneStep, script, 3)
	out, rep, err := run(t, tr, dir, nil)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	names, prompts := calls(t, dir0)
	if strings.Join(names, " ") != "run-3 validate-3 retry-3 validate-3 retry-3 validate-3" {
		t.Fatalf("calls %v", names)
	}
	if !strings.Contains(prompts[2], "critique number 2") || strings.Contains(prompts[2], "critique number 4") {
		t.Errorf("first retry prompt:\n%s", prompts[2])
	}
	if !strings.Contains(prompts[4], "critique number 2") || !strings.Contains(prompts[4], "critique number 4") || !strings.HasPrefix(prompts[4], "Write the report") {
		t.Errorf("second retry prompt lacks the earlier critiques:\n%s", prompts[4])
	}
	if !strings.Contains(out, "(retry CLI)") {
		t.Errorf("retries did not go through the retry CLI:\n%s", out)
	}
	if rep.Nodes[0].Retries != 2 || rep.Nodes[0].Validation == nil || !rep.Nodes[0].Validation.FullyCompleted {
		t.Errorf("report node %+v", rep.Nodes[0])
	}
}

// TestRetriesRunOut: when every validation fails, the run fails after the
// limit, naming the node and the last critique.
func TestRetriesRunOut(t *testing.T) {
	dir0 := t.TempDir()
	script := standIn(t, dir0, `case "$prompt" in
*"keys fully_completed"*) echo '{"fully_completed": false, "warnings": ["still no report"]}' ;;
*) echo '{"completed": true}' ;;
esac`)
	tr, dir := setup(t, oneStep, script, 1)
	_, rep, err := run(t, tr, dir, nil)
	if err == nil || !strings.Contains(err.Error(), `node 3 (row 4) "Write the report": not accepted after 1 retries (limit 1)`) || !strings.Contains(err.Error(), "still no report") {
		t.Fatalf("err = %v", err)
	}
	if names, _ := calls(t, dir0); len(names) != 4 {
		t.Errorf("calls %v, want run, validate, retry, validate", names)
	}
	if rep.Status != "failed" || !strings.Contains(rep.Error, "still no report") {
		t.Errorf("report %+v", rep)
	}
}

// TestIncompleteCountsAsFailure: completed false is retried even without
// validation.
func TestIncompleteCountsAsFailure(t *testing.T) {
	dir0 := t.TempDir()
	script := standIn(t, dir0, `if [ -n "$DECREE_RETRY" ]; then echo '{"completed": true}'; else echo '{"completed": false, "comments": ["ran out of time"]}'; fi`)
	tr, dir := setup(t, "3,Process,,,,,NoValidation,,Write the report,,,\n", script, 2)
	if out, _, err := run(t, tr, dir, nil); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	names, prompts := calls(t, dir0)
	if strings.Join(names, " ") != "run-3 retry-3" || !strings.Contains(prompts[1], "ran out of time") {
		t.Errorf("calls %v\n%s", names, prompts)
	}
}

// TestTimeoutKillsTheGroup: a CLI over its node's timeout is stopped with
// its whole process group and the run fails.
func TestTimeoutKillsTheGroup(t *testing.T) {
	dir0 := t.TempDir()
	pidFile := filepath.Join(dir0, "child.pid")
	script := standIn(t, dir0, `sleep 300 &
echo $! > `+pidFile+`
sleep 300`)
	tr, dir := setup(t, "3,Process,,,,,,,Slow work,,1,\n", script, 3)
	start := time.Now()
	_, _, err := run(t, tr, dir, nil)
	if err == nil || !strings.Contains(err.Error(), `node 3 (row 4) "Slow work": CLI AI (run) timed out after 1s; its process group was killed`) {
		t.Fatalf("err = %v", err)
	}
	if d := time.Since(start); d > 20*time.Second {
		t.Errorf("took %s", d)
	}
	b, rerr := os.ReadFile(pidFile)
	if rerr != nil {
		t.Fatal(rerr)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	deadline := time.Now().Add(5 * time.Second)
	for syscall.Kill(pid, 0) == nil {
		if time.Now().After(deadline) {
			t.Fatalf("the CLI's background child %d survived the timeout", pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestNoMatchFails: an answer naming no route fails the run with the
// answer and the labels.
func TestNoMatchFails(t *testing.T) {
	dir0 := t.TempDir()
	script := standIn(t, dir0, `case "$prompt" in
*"about dogs?"*) echo '{"answer": "Maybe"}' ;;
*"keys fully_completed"*) echo '{"fully_completed": true}' ;;
*) echo '{"completed": true}' ;;
esac`)
	tr, dir := setup(t, animals, script, 3)
	_, rep, err := run(t, tr, dir, nil)
	want := `node 5 (row 6) "Are any of the files about dogs?": the answer "Maybe" matches no route; the routes are "Yes", "No"`
	if err == nil || err.Error() != want {
		t.Fatalf("err = %v\nwant %s", err, want)
	}
	if last := rep.Nodes[len(rep.Nodes)-1]; last.ID != "5" || !strings.Contains(last.Error, "Maybe") {
		t.Errorf("report %+v", rep.Nodes)
	}
}

// TestDecisionValidated: a decision with validate_prompt is validated and
// retried like a process step.
func TestDecisionValidated(t *testing.T) {
	dir0 := t.TempDir()
	script := standIn(t, dir0, `case "$prompt" in
*"Is the choice justified"*) if [ -n "$(ls "$calls" | grep retry)" ]; then echo '{"fully_completed": true}'; else echo '{"fully_completed": false, "warnings": ["look again at file 2"]}'; fi ;;
*"keys fully_completed"*) echo '{"fully_completed": true}' ;;
*"about dogs?"*) if [ -n "$DECREE_RETRY" ]; then echo '{"answer": "Yes"}'; else echo '{"answer": "No"}'; fi ;;
*) echo '{"completed": true}' ;;
esac`)
	rows := strings.Replace(animals, "5,Decision,,,,,,,Are any of the files about dogs?,,,", "5,Decision,,,,,,,Are any of the files about dogs?,,,Is the choice justified?", 1)
	tr, dir := setup(t, rows, script, 3)
	out, rep, err := run(t, tr, dir, nil)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	names, prompts := calls(t, dir0)
	if strings.Join(names, " ") != "run-4 validate-4 run-5 validate-5 retry-5 validate-5" {
		t.Fatalf("calls %v", names)
	}
	if !strings.Contains(prompts[4], "look again at file 2") || !strings.Contains(prompts[4], `"Yes", "No"`) {
		t.Errorf("decision retry prompt:\n%s", prompts[4])
	}
	if rep.Nodes[0].Type != "start" || rep.Nodes[2].Route != "Yes" || rep.Nodes[len(rep.Nodes)-1].ID != "7" {
		t.Errorf("report %+v", rep.Nodes)
	}
}

// TestCLIFailures: no JSON, a non-zero exit: clear errors naming the node.
func TestCLIFailures(t *testing.T) {
	for body, want := range map[string]string{
		`echo "I did it!"`:      `node 3 (row 4) "Write the report": CLI AI: its output holds no JSON object with the key "completed"`,
		`echo oops >&2; exit 3`: "node 3 (row 4) \"Write the report\": CLI AI (run, `bash ",
	} {
		dir0 := t.TempDir()
		tr, dir := setup(t, oneStep, standIn(t, dir0, body), 3)
		_, _, err := run(t, tr, dir, nil)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: err = %v, want %s", body, err, want)
		}
		if strings.Contains(body, "exit 3") && !strings.Contains(err.Error(), "exited with code 3") {
			t.Errorf("err = %v", err)
		}
	}
}

// TestPlaceholders: {{message}} is the body without frontmatter; the
// standard parameters fill their placeholders.
func TestPlaceholders(t *testing.T) {
	dir0 := t.TempDir()
	script := standIn(t, dir0, `echo '{"completed": true}'`)
	tr, dir := setup(t, `3,Process,,,,,NoValidation,,"Do {{ message }} (from {{message_file}}, spec {{spec_file}}, id {{message_id}})",,,`+"\n", script, 0)
	if err := os.MkdirAll(filepath.Join(dir, "runs"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "runs", "m.md"), []byte("---\nid: x\n---\nadd a dog\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, _, err := run(t, tr, dir, map[string]string{"message_file": "runs/m.md", "spec_file": "specs/a.spec.md", "message_id": "42-0"})
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	_, prompts := calls(t, dir0)
	if !strings.HasPrefix(prompts[0], "Do add a dog (from runs/m.md, spec specs/a.spec.md, id 42-0)\n") {
		t.Errorf("prompt %q", prompts[0])
	}
}

// TestShellCommand: the prompt reaches the CLI as one argument, exactly,
// however the template quotes the placeholder; the shell never parses it.
func TestShellCommand(t *testing.T) {
	prompt := "it's \"quoted\" $(touch pwned) `id` $HOME \\ end\nline 2"
	dir := t.TempDir()
	for _, tmpl := range []string{
		`printf '[%s]' <prompt>`,
		`printf '[%s]' "<prompt>"`,
		`printf '[%s]' '<prompt>'`,
		`printf '[%s]' "say: <prompt>!"`,
		`printf '[%s]' 'say: <prompt>!'`,
	} {
		res, err := call{Template: tmpl, Code: "X", Prompt: prompt, Dir: dir, Env: os.Environ(), Grace: time.Second, Output: &bytes.Buffer{}}.run(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		want := "[" + prompt + "]"
		if strings.Contains(tmpl, "say") {
			want = "[say: " + prompt + "!]"
		}
		if res.Stdout != want {
			t.Errorf("%s: got %q, want %q (script %s)", tmpl, res.Stdout, want, ShellCommand(tmpl))
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "pwned")); err == nil {
		t.Error("the prompt was executed by the shell")
	}
}

func TestFindObject(t *testing.T) {
	for out, want := range map[string]string{
		`{"answer": "Yes"}`: "Yes",
		"Sure.\n```json\n{\"choices\": [\"a\"], \"answer\": \"No\", \"reasons\": [\"x {y}\"]}\n```\nBye": "No",
		`{"answer": "first"} then {"answer": "second"}`:                                                  "second",
		`{"answer": "real", "nested": {"a": 1}} {"unrelated": true}`:                                     "real",
		`{"answer": 7}`:                     "7",
		`no json here`:                      "",
		`{"answer": "cut off`:               "",
		`{ "answer" : "spaced" , "x": [] }`: "spaced",
	} {
		d, err := ParseDecision(out)
		if (err != nil) != (want == "") || d.Answer != want {
			t.Errorf("%q: answer %q err %v, want %q", out, d.Answer, err, want)
		}
	}
	p, err := ParseProcess(`{"completed": "true", "secs_taken": "2.5", "comments": "one"}`)
	if err != nil || !p.Completed || p.SecsTaken != 2.5 || fmt.Sprint(p.Comments) != "[one]" {
		t.Errorf("lenient process parse: %+v %v", p, err)
	}
}

func TestArtifactName(t *testing.T) {
	for attempt, want := range map[int]string{0: "tree.json", 1: "tree.json", 2: "tree.try-002.json", 12: "tree.try-012.json"} {
		if got := ArtifactName(ReportFile, attempt); got != want {
			t.Errorf("attempt %d: %s, want %s", attempt, got, want)
		}
	}
	if got := ArtifactName(LogFile, 3); got != "tree.try-003.log" {
		t.Errorf("log: %s", got)
	}
}
