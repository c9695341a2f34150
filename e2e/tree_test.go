package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/decreehq/decree/internal/testtool"
)

// Decision-tree routines end to end: `decreectl run -v routine=NAME` on a
// NAME.tree.csv, run by the decree-driver-tree plugin (beside the built
// decreectl in binary mode, in .decree/drivers/ in-process), with the AI
// CLIs played by a bash stand-in that answers JSON by node.

// treeProject makes a project whose tree: settings run the stand-in as
// the CLIs STANDIN (runs and validations) and STANDIN-RETRY (retries).
// The stand-in records each call as calls/NNN-STEP-NODE (the prompt) in a
// directory outside the project, then runs body with $prompt set.
func treeProject(t *testing.T, m mode, extraConfig, chart, body string) (p *project, calls string) {
	t.Helper()
	p = newProject(t, m, "")
	calls = p.dir + "-calls"
	if err := os.MkdirAll(calls, 0o755); err != nil {
		t.Fatal(err)
	}
	ai := p.script("ai.sh", `# A stand-in for an AI CLI (claude -p and the like), written by the e2e tests.
calls="`+calls+`"
n=$(ls "$calls" | wc -l)
printf '%s' "$2" > "$calls/$(printf %03d "$n")-$DECREE_TREE_STEP-$DECREE_TREE_NODE"
role="$1"
prompt="$2"
`+body)
	p.write(".decree/config.yml", `commands:
  router: ""
default_routine: develop
`+extraConfig+`tree:
  default_cli: standin
  retry_cli: standin-retry
  timeout_s: 60
  clis:
    standin: `+ai+` run <prompt>
    standin-retry: `+ai+` retry "<prompt>"
`)
	p.write(".decree/routines/pets.tree.csv", chart)
	if m == inProcess {
		// The test binary is not beside the plugin: use the project's
		// drivers directory, the third place a worker looks.
		if err := os.MkdirAll(p.path(".decree/drivers"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(bin(t, "decree-driver-tree"), p.path(".decree/drivers/decree-driver-tree")); err != nil {
			t.Fatal(err)
		}
	}
	return p, calls
}

// callNames lists the recorded calls, "STEP-NODE" in order.
func callNames(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		out = append(out, e.Name()[4:])
	}
	return out
}

func callPrompt(t *testing.T, dir string, i int) string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil || i >= len(ents) {
		t.Fatalf("call %d: %v", i, err)
	}
	return mustRead(t, filepath.Join(dir, ents[i].Name()))
}

const petsChart = `Id,Name,Shape Library,Page ID,Contained By,Group,Line Source,Line Destination,Source Arrow,Destination Arrow,Tags,Status,Text Area 1,Comments,timeout
1,Document,,,,,,,,,,Draft,Pets,,
2,Page,,,,,,,,,,,Page 1,,
3,Terminator,Flowchart Shapes/Containers,2,,,,,,,,,Start,,
4,Process,Flowchart Shapes/Containers,2,,,,,,,,,Create cats.txt about this cat: {{message}},,
5,Decision,Flowchart Shapes/Containers,2,,,,,,,,,Is there a file about dogs?,,
6,Process,Flowchart Shapes/Containers,2,,,,,,,,,Create dogs.txt about a dog,,
7,Terminator,Flowchart Shapes/Containers,2,,,,,,,,,End,,
8,Terminator,Flowchart Shapes/Containers,2,,,,,,,,,End,,
9,Line,,2,,,5,7,None,Arrow,,,Yes,,
10,Line,,2,,,5,6,None,Arrow,,,No,,
11,Line,,2,,,4,5,None,Arrow,,,,,
12,Line,,2,,,3,4,None,Arrow,,,,,
13,Line,,2,,,6,8,None,Arrow,,,,,
`

// petsAI does the work the prompts ask for and judges it: the first
// dogs.txt lacks a bark, the validation says so, and only a retry prompt
// carrying that critique gets a bark.
const petsAI = `case "$prompt" in
*"keys fully_completed"*)
  if [ "$DECREE_TREE_NODE" = 6 ] && ! grep -q bark dogs.txt; then
    echo '{"fully_completed": false, "partially_completed": true, "should_retry": true, "warnings": ["dogs.txt must mention a bark"]}'
  else
    echo '{"fully_completed": true, "partially_completed": true, "should_retry": false, "warnings": []}'
  fi ;;
*"Is there a file about dogs?"*)
  if [ -e dogs.txt ]; then a=Yes; else a=No; fi
  echo "Looking around..."; printf '` + "```json" + `\n{"choices": ["Yes", "No"], "answer": "%s", "reasons": ["listed the files"]}\n` + "```" + `\n' "$a" ;;
*"Create cats.txt"*)
  echo "$prompt" | head -1 > cats.txt
  echo '{"completed": true, "secs_taken": 1, "tokens_used": 5, "comments": ["wrote cats.txt"]}' ;;
*"Create dogs.txt"*)
  case "$prompt" in *"must mention a bark"*) echo "woof, bark ($role)" > dogs.txt ;; *) echo "woof ($role)" > dogs.txt ;; esac
  echo '{"completed": true, "comments": ["wrote dogs.txt"]}' ;;
*) echo "unexpected prompt" >&2; exit 9 ;;
esac
`

// treeRun: a decision picks its branch, a failed validation is retried
// through the retry CLI with the critique in the prompt, Start and End
// reach no CLI, and tree.json, tree.log and the streamed output record it.
func treeRun(t *testing.T, m mode) {
	p, calls := treeProject(t, m, "", petsChart, petsAI)
	r := p.ctl("", "run", "-m", "pets", "-p", "a tabby who sleeps all day", "-v", "routine=pets")
	mustCode(t, r, 0)
	p.sameTree(map[string]string{
		"cats.txt": "Create cats.txt about this cat: a tabby who sleeps all day\n",
		"dogs.txt": "woof, bark (retry)\n",
	})
	want := "run-4 validate-4 run-5 run-6 validate-6 retry-6 validate-6"
	if got := strings.Join(callNames(t, calls), " "); got != want {
		t.Fatalf("CLI calls %s, want %s", got, want)
	}
	contains(t, "decision prompt", callPrompt(t, calls, 2), `choosing exactly one of: "Yes", "No"`)
	contains(t, "retry prompt", callPrompt(t, calls, 5), "dogs.txt must mention a bark")
	contains(t, "retry prompt", callPrompt(t, calls, 5), "Create dogs.txt about a dog")

	id := p.onlyRun()
	dir := ".decree/runs/" + id + "/"
	var rep struct {
		Chart  string `json:"chart"`
		Status string `json:"status"`
		Nodes  []struct {
			ID, Name, Type, Route string
			Retries               int
			Response              map[string]any
			Validation            map[string]any
		} `json:"nodes"`
	}
	if err := json.Unmarshal([]byte(p.read(dir+"tree.json")), &rep); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, n := range rep.Nodes {
		got = append(got, n.Type+":"+n.ID+":"+n.Route+":"+strconv.Itoa(n.Retries))
	}
	if rep.Chart != "Pets" || rep.Status != "succeeded" || strings.Join(got, " ") != "start:3::0 process:4::0 decision:5:No:0 process:6::1 end:8::0" {
		t.Errorf("tree.json: %s %s %v", rep.Chart, rep.Status, got)
	}
	if rep.Nodes[2].Response["answer"] != "No" || rep.Nodes[3].Validation["fully_completed"] != true {
		t.Errorf("tree.json responses: %+v", rep.Nodes)
	}
	log := p.read(dir + "tree.log")
	contains(t, "tree.log", log, "--- prompt\nCreate dogs.txt about a dog")
	contains(t, "tree.log", log, "Looking around...")
	contains(t, "streamed output", r.stdout, `tree: node 5 (row 6) "Is there a file about dogs?": answered "No" -> node 6`)
	contains(t, "routine.log", p.read(dir+"routine.log"), "tree: finished")

	r = p.ctl("", "routines")
	mustCode(t, r, 0)
	if !regexp.MustCompile(`(?m)^pets +tree +tree +true +- +Decision tree "Pets" \(6 nodes, 1 decision\), starting with: Create cats.txt`).MatchString(r.stdout) {
		t.Errorf("routines listing:\n%s", r.stdout)
	}
}

// treeTimeoutRevert: a CLI over its node's timeout is killed with its
// process group; the attempt fails, decree retries it, and when the
// attempts run out the work is reverted and the message dead-lettered.
func treeTimeoutRevert(t *testing.T, m mode) {
	chart := strings.Replace(petsChart, "Create cats.txt about this cat: {{message}},,", "Create cats.txt about this cat: {{message}},,1", 1)
	p, calls := treeProject(t, m, "max_retries: 2\n", chart, `pids="`+"$PWD-calls.pids"+`"
case "$prompt" in
*"Create cats.txt"*)
  echo "attempt $DECREE_ATTEMPT" > cats.txt
  sleep 300 & echo $! >> "$pids"
  sleep 300 ;;
*) echo '{"fully_completed": true, "completed": true}' ;;
esac`)
	p.write("keep.txt", "keep\n")
	start := time.Now()
	r := p.ctl("", "run", "-m", "slow", "-p", "x", "-v", "routine=pets")
	mustCode(t, r, 1)
	if d := time.Since(start); d > 60*time.Second {
		t.Errorf("took %s; the 1 s node timeout was not enforced", d)
	}
	contains(t, "stderr", r.stderr, "dead-lettered")
	if got := strings.Join(callNames(t, calls), " "); got != "run-4 run-4" {
		t.Errorf("CLI calls %s, want one run per attempt", got)
	}
	p.sameTree(map[string]string{"keep.txt": "keep\n"}) // cats.txt reverted
	id := p.onlyRun()
	rj := p.runJSON(id)
	if rj.Attempts != 2 || rj.Outcome == "succeeded" {
		t.Errorf("run.json %+v", rj)
	}
	contains(t, "routine.log", p.read(".decree/runs/"+id+"/routine.log"), "CLI STANDIN (run) timed out after 1s; its process group was killed")
	contains(t, "tree.log", p.read(".decree/runs/"+id+"/tree.log"), "attempt 1, started")
	contains(t, "second attempt's tree log", p.read(".decree/runs/"+id+"/tree.try-002.log"), "attempt 2, started")
	contains(t, "second attempt's tree.json", p.read(".decree/runs/"+id+"/tree.try-002.json"), `"status": "failed"`)
	b, err := os.ReadFile(p.dir + "-calls.pids")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range strings.Fields(string(b)) {
		pid, _ := strconv.Atoi(f)
		if pid > 0 && syscall.Kill(pid, 0) == nil {
			t.Errorf("process %d started by the timed-out CLI is still running", pid)
		}
	}
}

// treeNoMatch: an answer that names no route fails the attempt with the
// answer and the labels; a second attempt that answers well succeeds.
func treeNoMatch(t *testing.T, m mode) {
	p, calls := treeProject(t, m, "max_retries: 2\n", petsChart, `case "$prompt" in
*"keys fully_completed"*) echo '{"fully_completed": true}' ;;
*"Is there a file about dogs?"*)
  if [ "$DECREE_ATTEMPT" = 1 ]; then echo '{"answer": "Maybe"}'; else echo '{"answer": "yes"}'; fi ;;
*"Create cats.txt"*) echo "cat $DECREE_ATTEMPT" >> cats.txt; echo '{"completed": true}' ;;
esac`)
	r := p.ctl("", "run", "-m", "unsure", "-p", "x", "-v", "routine=pets")
	mustCode(t, r, 0)
	want := `node 5 (row 6) "Is there a file about dogs?": the answer "Maybe" matches no route; the routes are "Yes", "No"`
	contains(t, "streamed output", r.stdout, want)
	id := p.onlyRun()
	contains(t, "first attempt's log", p.read(".decree/runs/"+id+"/routine.log"), want)
	// The first attempt's cats.txt was reverted before the second ran.
	p.sameTree(map[string]string{"cats.txt": "cat 2\n"})
	if got := strings.Join(callNames(t, calls), " "); got != "run-4 validate-4 run-5 run-4 validate-4 run-5" {
		t.Errorf("CLI calls %s", got)
	}
	if rj := p.runJSON(id); rj.Attempts != 2 || rj.Outcome != "succeeded" {
		t.Errorf("run.json %+v", rj)
	}
}

// treeInvalid: a chart that cannot run is dead-lettered at once, its note
// listing every problem with rows.
func treeInvalid(t *testing.T, m mode) {
	chart := petsChart + "14,Line,,2,,,8,4,None,Arrow,,,,,\n15,Line,,2,,,6,99,None,Arrow,,,,,\n"
	p, calls := treeProject(t, m, "", chart, `exit 1`)
	r := p.ctl("", "run", "-m", "bad", "-p", "x", "-v", "routine=pets")
	mustCode(t, r, 1)
	note := p.read(".decree/inbox/dead/bad.md.dead.txt")
	contains(t, "dead note", note, "reason: InvalidRoutine")
	contains(t, "dead note", note, "line 15 (row 16): the line's destination 99 is not a shape of this chart")
	contains(t, "dead note", note, "an End terminator cannot have outgoing lines")
	// A codename neither built in nor under tree.clis: the same at once.
	p.write(".decree/routines/codes.tree.csv", "Id,Name,Line Source,Line Destination,Text Area 1,cli\n3,Process,,,Do it,CHATGPT\n")
	r = p.ctl("", "run", "-m", "bad2", "-p", "x", "-v", "routine=codes")
	mustCode(t, r, 1)
	note = p.read(".decree/inbox/dead/bad2.md.dead.txt")
	contains(t, "dead note", note, "reason: InvalidRoutine")
	contains(t, "dead note", note, `node 3 (row 2) "Do it": metadata cli: unknown CLI codename "CHATGPT"; known: AIDER, CLAUDE, COPILOT, CURSOR, GEMINI, QODO, STANDIN, STANDIN-RETRY`)
	if names := callNames(t, calls); len(names) != 0 {
		t.Errorf("CLI calls %v", names)
	}
}

func TestTreeRoutines(t *testing.T) {
	testtool.Require(t, "bash")
	for _, m := range modes {
		t.Run(string(m), func(t *testing.T) {
			t.Parallel()
			for name, f := range map[string]func(*testing.T, mode){
				"run": treeRun, "timeout-revert": treeTimeoutRevert, "no-match": treeNoMatch, "invalid": treeInvalid,
			} {
				t.Run(name, func(t *testing.T) {
					t.Parallel()
					f(t, m)
				})
			}
		})
	}
}
