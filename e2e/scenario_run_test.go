package e2e

import (
	"encoding/json"
	"fmt"
	"github.com/decreehq/decree/internal/testtool"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

const baseConfig = `commands:
  router: ""
max_retries: 3
default_routine: develop
`

// specInputFile: run -v input_file=X.spec.md makes a spec message named
// after the file, with every artifact in runs/<chain>-0/, the routine run
// by bash with combined output in routine.log, and the spec marked
// processed.
func specInputFile(t *testing.T, m mode) {
	p := newProject(t, m, baseConfig)
	p.routine("develop", "", `echo "spec=$spec_file id=$message_id dir=$message_dir seq=$seq"
echo "to-stderr" >&2
cat "$spec_file" > out.txt`)
	p.write(".decree/migrations/01-add-auth.spec.md", "# Add auth\n\nImplement login.\n")
	p.write("README.md", "project\n")

	r := p.ctl("", "run", "-v", "input_file=.decree/migrations/01-add-auth.spec.md")
	mustCode(t, r, 0)
	if got := p.messages(".decree/inbox/done"); len(got) != 1 || got[0] != "01-add-auth.md" {
		t.Fatalf("done = %v, want [01-add-auth.md]\n%s", got, r)
	}
	done := p.read(".decree/inbox/done/01-add-auth.md")
	contains(t, "done message", done, "type: spec")
	contains(t, "done message", done, "input_file: .decree/migrations/01-add-auth.spec.md")

	id := p.onlyRun()
	if !strings.HasSuffix(id, "-0") {
		t.Errorf("run id %s does not end in -0", id)
	}
	for _, f := range []string{"message.md", "manifest.json", "changes.diff", "routine.log", "run.json"} {
		if !p.exists(".decree/runs/" + id + "/" + f) {
			t.Errorf("runs/%s/%s missing", id, f)
		}
	}
	for _, f := range []string{"output.ipynb", "papermill.log"} {
		if p.exists(".decree/runs/" + id + "/" + f) {
			t.Errorf("shell routine left runs/%s/%s", id, f)
		}
	}
	log := p.read(".decree/runs/" + id + "/routine.log")
	contains(t, "routine.log", log, "spec=.decree/migrations/01-add-auth.spec.md id="+id+" dir=.decree/runs/"+id+" seq=0")
	contains(t, "routine.log", log, "to-stderr")
	contains(t, "streamed stdout", r.stdout, "spec=.decree/migrations/01-add-auth.spec.md")
	contains(t, "message.md", p.read(".decree/runs/"+id+"/message.md"), "id: "+id)

	rj := p.runJSON(id)
	if rj.Routine != "develop" || rj.Trigger != "inbox" || rj.Migration != "01-add-auth.spec.md" ||
		rj.Attempts != 1 || rj.ExitCode != 0 || rj.Outcome != "succeeded" || rj.MessageID != id {
		t.Errorf("run.json = %+v", rj)
	}
	if !regexp.MustCompile(`T\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)$`).MatchString(rj.Start) || rj.End == "" || rj.Duration == "" || rj.TimeZone == "" {
		t.Errorf("run.json times lack a zone or a duration: %+v", rj)
	}
	contains(t, "processed.md", p.read(".decree/processed.md"), "01-add-auth.spec.md")

	diff := p.read(".decree/runs/" + id + "/changes.diff")
	contains(t, "changes.diff", diff, "+++ b/out.txt")
	contains(t, "changes.diff", diff, "+Implement login.")
	// The manifest was taken before the routine: it has README.md, not out.txt.
	man := p.manifest(id)
	if e, ok := man["README.md"]; !ok || e.SHA256 != sha("project\n") || e.Size != 8 {
		t.Errorf("manifest README.md = %+v", e)
	}
	if _, ok := man["out.txt"]; ok {
		t.Errorf("manifest lists out.txt, which the routine created afterwards")
	}
}

// nameAndPrompt: -m names the message, -p is its body, type task.
func nameAndPrompt(t *testing.T, m mode) {
	p := newProject(t, m, baseConfig)
	p.routine("develop", "", `cat "$message_file"`)
	r := p.ctl("", "run", "-m", "fix-types", "-p", "fix the auth types")
	mustCode(t, r, 0)
	if got := p.messages(".decree/inbox/done"); len(got) != 1 || got[0] != "fix-types.md" {
		t.Fatalf("done = %v\n%s", got, r)
	}
	msg := p.read(".decree/inbox/done/fix-types.md")
	contains(t, "message", msg, "type: task")
	contains(t, "message", msg, "fix the auth types")
	contains(t, "routine.log", p.read(".decree/runs/"+p.onlyRun()+"/routine.log"), "fix the auth types")
	contains(t, "stderr", r.stderr, "queued fix-types")

	// A name with spaces and capitals is kebab-cased.
	r = p.ctl("", "run", "-m", "Fix The Types", "-p", "again")
	mustCode(t, r, 0)
	if !p.exists(".decree/inbox/done/fix-the-types.md") {
		t.Errorf("done = %v, want fix-the-types.md", p.messages(".decree/inbox/done"))
	}
}

// stdinBody: with no -p, a piped standard input is the body.
func stdinBody(t *testing.T, m mode) {
	p := newProject(t, m, baseConfig)
	p.routine("develop", "", `cat "$message_file"`)
	r := p.ctl("task from stdin\nsecond line\n", "run", "-m", "piped")
	mustCode(t, r, 0)
	msg := p.read(".decree/inbox/done/piped.md")
	contains(t, "message", msg, "task from stdin\nsecond line")
	contains(t, "message", msg, "type: task")
}

// routerScript is a stand-in for the AI CLI: it logs each prompt and
// answers a name for naming prompts and a routine otherwise.
func routerScript(p *project, name, routineAnswer string) (cmd, calls string) {
	calls = p.path("../" + filepath.Base(p.dir) + "-router-calls.log")
	cmd = p.script("claude", fmt.Sprintf(`prompt=$(cat)
printf '%%s\n---\n' "$prompt" >> %q
if grep -q "Summarize this task" <<<"$prompt"; then
  printf '%%s\n' %q
else
  printf '%%s\n' %q
fi`, calls, name, routineAnswer))
	return cmd, calls
}

// routerDerivesName: without -m the router names the message; a name
// already used in done/ gets -2. The router also picks the routine.
func routerDerivesName(t *testing.T, m mode) {
	p := newProject(t, m, "")
	cmd, calls := routerScript(p, "Fix Auth Type Errors", "review")
	p.write(".decree/config.yml", fmt.Sprintf("commands:\n  router: %q\ndefault_routine: develop\n", cmd))
	p.routine("develop", "", `echo develop ran`)
	p.routine("review", "", `echo review ran`)
	p.write(".decree/inbox/done/fix-auth-type-errors.md", "---\nid: 2020010100000000-0\n---\nolder\n")

	r := p.ctl("", "run", "-p", "fix the auth type errors")
	mustCode(t, r, 0)
	if !p.exists(".decree/inbox/done/fix-auth-type-errors-2.md") {
		t.Fatalf("done = %v, want fix-auth-type-errors-2.md\n%s", p.messages(".decree/inbox/done"), r)
	}
	id := p.onlyRun()
	if rj := p.runJSON(id); rj.Routine != "review" {
		t.Errorf("routine = %q, want the router's pick review", rj.Routine)
	}
	log, err := os.ReadFile(calls)
	if err != nil {
		t.Fatalf("router never called: %v", err)
	}
	contains(t, "router prompts", string(log), "Summarize this task as a kebab-case name")
	contains(t, "router prompts", string(log), "fix the auth type errors")
	contains(t, "router prompts", string(log), "- review:")
}

// routineFlagSkipsRouter: -v routine=X sets the routine; the router is
// never asked (the name comes from -m).
func routineFlagSkipsRouter(t *testing.T, m mode) {
	p := newProject(t, m, "")
	cmd, calls := routerScript(p, "ignored", "review")
	p.write(".decree/config.yml", fmt.Sprintf("commands:\n  router: %q\n", cmd))
	p.routine("develop", "", `echo develop ran`)
	p.routine("review", "", `echo review ran`)
	r := p.ctl("", "run", "-m", "fix", "-p", "fix", "-v", "routine=develop")
	mustCode(t, r, 0)
	contains(t, "message", p.read(".decree/inbox/done/fix.md"), "routine: develop")
	if rj := p.runJSON(p.onlyRun()); rj.Routine != "develop" {
		t.Errorf("routine = %q", rj.Routine)
	}
	if _, err := os.Stat(calls); err == nil {
		t.Errorf("the router was called although routine was given:\n%s", mustRead(t, calls))
	}
}

// routerGarbage: a router answer that is no enabled routine falls back to
// default_routine with a warning; a failing router names the message
// run-<chain>.
func routerGarbage(t *testing.T, m mode) {
	p := newProject(t, m, "")
	garbage := p.script("claude", `cat >/dev/null; printf '%s\n' "I'd say ¯\\_(ツ)_/¯ -- maybe 'deploy'?" "more text"`)
	p.write(".decree/config.yml", fmt.Sprintf("commands:\n  router: %q\ndefault_routine: fallback\n", garbage))
	p.routine("fallback", "", `echo fallback ran`)
	p.routine("other", "", `echo other ran`)
	r := p.ctl("", "run", "-m", "g", "-p", "do something")
	mustCode(t, r, 0)
	if rj := p.runJSON(p.onlyRun()); rj.Routine != "fallback" {
		t.Errorf("routine = %q, want default_routine fallback", rj.Routine)
	}
	contains(t, "stderr", r.stderr, "not an enabled routine")

	failing := p.script("claude-broken", `cat >/dev/null; echo "quota exceeded" >&2; exit 3`)
	p.write(".decree/config.yml", fmt.Sprintf("commands:\n  router: %q\ndefault_routine: fallback\n", failing))
	r = p.ctl("", "run", "-p", "another task")
	mustCode(t, r, 0)
	var named bool
	for _, f := range p.messages(".decree/inbox/done") {
		if regexp.MustCompile(`^run-\d{16}\.md$`).MatchString(f) {
			named = true
		}
	}
	if !named {
		t.Errorf("done = %v, want a run-<chain>.md name when the router fails\n%s", p.messages(".decree/inbox/done"), r)
	}
}

// customParams: -v pairs land in the frontmatter; declared custom
// parameters reach the routine as env vars, undeclared ones do not,
// missing ones keep the routine's default.
func customParams(t *testing.T, m mode) {
	p := newProject(t, m, baseConfig)
	p.routine("pr-review", `target_branch="${target_branch:-main}"
reviewer="${reviewer:-nobody}"`, `echo "target_branch=$target_branch reviewer=$reviewer unknown=${unknown_field:-unset}"`)
	r := p.ctl("", "run", "-m", "pr-review", "-p", "Review the current branch",
		"-v", "routine=pr-review", "-v", "target_branch=dev", "-v", "unknown_field=zzz")
	mustCode(t, r, 0)
	msg := p.read(".decree/inbox/done/pr-review.md")
	for _, want := range []string{"routine: pr-review", "target_branch: dev", "unknown_field: zzz", "type: task"} {
		contains(t, "frontmatter", msg, want)
	}
	contains(t, "routine.log", p.read(".decree/runs/"+p.onlyRun()+"/routine.log"),
		"target_branch=dev reviewer=nobody unknown=unset")
}

// routineDiscovery: .ipynb is ignored without notebook_support (only a
// notebook: refused as unknown; both: the .sh runs); an explicit extension is
// used as is.
func routineDiscovery(t *testing.T, m mode) {
	p := newProject(t, m, baseConfig)
	p.write(".decree/routines/nbonly.ipynb", notebookJSON("echo nb > nb.txt"))
	p.write(".decree/routines/both.ipynb", notebookJSON("echo nb > nb.txt"))
	p.routine("both", "", `echo shell ran`)
	r := p.ctl("", "run", "-m", "a", "-p", "x", "-v", "routine=nbonly")
	mustCode(t, r, 1) // refused before queuing: no runnable routine of that name
	contains(t, "stderr", r.stderr, `routine "nbonly" does not exist`)
	r = p.ctl("", "run", "-m", "b", "-p", "x", "-v", "routine=both")
	mustCode(t, r, 0)
	r = p.ctl("", "run", "-m", "c", "-p", "x", "-v", "routine=both.sh")
	mustCode(t, r, 0)
	if p.exists("nb.txt") {
		t.Errorf("a notebook ran although notebook_support is off")
	}
	n := 0
	for _, id := range p.runs() {
		if strings.Contains(p.read(".decree/runs/"+id+"/routine.log"), "shell ran") {
			n++
		}
	}
	if n != 2 {
		t.Errorf("%d runs of both.sh, want 2 (runs %v)", n, p.runs())
	}
}

// notebookJSON is a minimal notebook: a parameters cell declaring the
// standard parameters and target_branch, then a %%bash cell.
func notebookJSON(bash string) string {
	params := "spec_file = \"\"\nmessage_file = \"\"\nmessage_id = \"\"\nmessage_dir = \"\"\nchain = \"\"\nseq = \"\"\ntarget_branch = \"main\"\n"
	nb := map[string]any{
		"nbformat": 4, "nbformat_minor": 5,
		"metadata": map[string]any{
			"kernelspec": map[string]any{"name": "python3", "display_name": "Python 3", "language": "python"},
		},
		"cells": []any{
			map[string]any{"cell_type": "markdown", "id": "d", "metadata": map[string]any{}, "source": "A notebook routine for the e2e tests."},
			map[string]any{"cell_type": "code", "id": "p", "metadata": map[string]any{"tags": []string{"parameters"}}, "source": params, "outputs": []any{}, "execution_count": nil},
			map[string]any{"cell_type": "code", "id": "w", "metadata": map[string]any{}, "outputs": []any{}, "execution_count": nil,
				"source": "import os, subprocess\nenv = dict(os.environ, message_id=message_id, target_branch=target_branch, seq=str(seq))\nsubprocess.run(['bash', '-c', " + pyQuote(bash) + "], check=True, env=env)\n"},
		},
	}
	b, _ := json.MarshalIndent(nb, "", " ")
	return string(b)
}

func pyQuote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// notebookRoutine: with notebook_support a notebook routine runs through
// real Jupyter with the parameters injected, custom ones included, and
// takes precedence over a .sh of the same name.
func notebookRoutine(t *testing.T, m mode) {
	testtool.Require(t, "jupyter")
	p := newProject(t, m, baseConfig+"notebook_support: true\n")
	p.write(".decree/routines/develop.ipynb", notebookJSON(`echo "nb $message_id $target_branch" > nb.txt`))
	p.routine("develop", "", `echo shell > sh.txt`)
	r := p.ctl("", "run", "-m", "nb", "-p", "x", "-v", "target_branch=release")
	mustCode(t, r, 0)
	id := p.onlyRun()
	if got := strings.TrimSpace(p.read("nb.txt")); got != "nb "+id+" release" {
		t.Errorf("nb.txt = %q", got)
	}
	if p.exists("sh.txt") {
		t.Errorf("the .sh ran although a notebook of the same name exists")
	}
	if !p.exists(".decree/runs/" + id + "/output.ipynb") {
		t.Errorf("no output.ipynb in the run directory: %v", p.list(".decree/runs/"+id))
	}
}

func mustRead(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
