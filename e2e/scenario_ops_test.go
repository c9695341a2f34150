package e2e

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/decreehq/decree/internal/testtool"
)

// requeue: a dead letter moved back (by `requeue` or by hand) runs again
// with the next `process`.
func requeue(t *testing.T, m mode) {
	p := newProject(t, m, "max_retries: 1\ndefault_routine: develop\n")
	p.routine("develop", "", `[ -f .decree/allow ] || { echo "not allowed yet"; exit 1; }
echo ran >> ran.txt`)
	r := p.ctl("", "run", "-m", "flaky", "-p", "x")
	mustCode(t, r, 1)
	id := p.onlyRun()
	if !p.exists(".decree/inbox/dead/flaky.md") {
		t.Fatalf("dead = %v", p.messages(".decree/inbox/dead"))
	}

	r = p.ctl("", "requeue", id)
	mustCode(t, r, 0)
	if !p.exists(".decree/inbox/flaky.md") || p.exists(".decree/inbox/dead/flaky.md") || p.exists(".decree/inbox/dead/flaky.md.dead.txt") {
		t.Fatalf("after requeue: inbox %v dead %v", p.messages(".decree/inbox"), p.list(".decree/inbox/dead"))
	}
	// Inspecting the project must not start the queued message.
	mustCode(t, p.ctl("", "status"), 0)
	if got := p.runJSON(id); got.Attempts != 1 {
		t.Fatalf("status ran the requeued message: %+v", got)
	}
	// Still failing: process runs it and reports the dead letter.
	r = p.ctl("", "process")
	mustCode(t, r, 1)
	if !p.exists(".decree/inbox/dead/flaky.md") {
		t.Fatalf("dead = %v\n%s", p.messages(".decree/inbox/dead"), r)
	}

	// Moved back by hand and fixed: process runs it to done.
	if err := osRename(p.path(".decree/inbox/dead/flaky.md"), p.path(".decree/inbox/flaky.md")); err != nil {
		t.Fatal(err)
	}
	p.write(".decree/allow", "")
	r = p.ctl("", "process")
	mustCode(t, r, 0)
	if !p.exists(".decree/inbox/done/flaky.md") {
		t.Fatalf("done = %v\n%s", p.messages(".decree/inbox/done"), r)
	}
	if rj := p.runJSON(id); rj.Outcome != "succeeded" {
		t.Errorf("run.json = %+v", rj)
	}
	p.sameTree(map[string]string{"ran.txt": "ran\n"})
	// Nothing left: process has nothing to do.
	r = p.ctl("", "process")
	mustCode(t, r, 0)
	contains(t, "stderr", r.stderr, "nothing to do")
}

// revertCommand: `diff ID` prints a patch git applies in reverse; `revert
// ID` restores the tree; it refuses, naming the paths, when a touched file
// changed since.
func revertCommand(t *testing.T, m mode) {
	p := newProject(t, m, baseConfig)
	orig := map[string]string{"a.txt": "one\ntwo\nthree\n", "c.txt": "to delete\n", "d.txt": "same\n"}
	for k, v := range orig {
		p.write(k, v)
	}
	p.routine("develop", "", `case "$(cat "$message_file")" in
  *FIRST*) sed -i 's/two/TWO/' a.txt; echo new > b.txt; rm c.txt ;;
  *SECOND*) echo more >> d.txt; echo extra > e.txt ;;
esac`)
	mustCode(t, p.ctl("", "run", "-m", "first", "-p", "FIRST"), 0)
	first := p.onlyRun()
	r := p.ctl("", "diff", first)
	mustCode(t, r, 0)
	if r.stdout != p.read(".decree/runs/"+first+"/changes.diff") {
		t.Errorf("diff output differs from changes.diff:\n%s", r.stdout)
	}
	testtool.Require(t, "git")
	if out, err := p.git(r.stdout, "apply", "-R", "--check", "-"); err != nil {
		t.Errorf("git apply -R --check rejects `decreectl diff`: %v %s", err, out)
	}
	r = p.ctl("", "revert", first)
	mustCode(t, r, 0)
	for _, f := range []string{"a.txt", "b.txt", "c.txt"} {
		contains(t, "revert output", r.stdout, f)
	}
	p.sameTree(orig)

	// A second message, then a manual edit of a file it touched.
	mustCode(t, p.ctl("", "run", "-m", "second", "-p", "SECOND"), 0)
	var second string
	for _, id := range p.runs() {
		if id != first {
			second = id
		}
	}
	p.write("d.txt", "edited by hand\n")
	r = p.ctl("", "revert", second)
	if r.code == 0 {
		t.Fatalf("revert succeeded over a hand edit\n%s", r)
	}
	// Exactly the hand-edited path is named; e.txt, untouched since, is not.
	contains(t, "refusal", r.stderr, "d.txt: changed since")
	if strings.Contains(r.stderr, "e.txt: changed since") {
		t.Errorf("the refusal names e.txt, which did not change since:\n%s", r.stderr)
	}
	if got := p.read("d.txt"); got != "edited by hand\n" {
		t.Errorf("refused revert changed d.txt to %q", got)
	}
	// With the hand edit undone but the diff damaged, the refusal says the
	// diff is corrupt, not that files changed.
	p.write("d.txt", "same\nmore\n")
	diffRel := ".decree/runs/" + second + "/changes.diff"
	good := p.read(diffRel)
	p.write(diffRel, strings.Replace(good, "+more", "+MORE", 1))
	r = p.ctl("", "revert", second)
	if r.code == 0 {
		t.Fatalf("revert succeeded with a damaged diff\n%s", r)
	}
	contains(t, "corrupt-diff refusal", r.stderr, "is corrupt")
	notContains(t, "corrupt-diff refusal", r.stderr, "changed since")
	p.write(diffRel, good)
	mustCode(t, p.ctl("", "revert", second), 0)
	p.sameTree(orig)
	// The first one cannot be reverted twice.
	r = p.ctl("", "revert", first)
	if r.code == 0 {
		t.Errorf("second revert of %s succeeded\n%s", first, r)
	}
}

// listings: runs/status/routines/workers with -o json, logs ID, status.
func listings(t *testing.T, m mode) {
	p := newProject(t, m, baseConfig+"notebook_support: true\n")
	p.write(".decree/routines/review.ipynb", `{"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [
{"cell_type": "markdown", "id": "d", "metadata": {}, "source": "## Reviews a change\n\nMore text."},
{"cell_type": "code", "id": "p", "metadata": {"tags": ["parameters"]}, "outputs": [], "execution_count": null, "source": "reviewer = \"bob\""}]}`)
	p.write(".decree/routines/crlf.sh", "#!/usr/bin/env bash\r\necho hi\r\n")
	p.routine("develop", "target_branch=\"${target_branch:-main}\"\nbase_dir=\"${base_dir:-$(pwd)}\"", `[ -f once ] || { touch once; echo "first try"; exit 1; }
echo "second try"`)
	mustCode(t, p.ctl("", "run", "-m", "listed", "-p", "x"), 0)
	id := p.onlyRun()

	r := p.ctl("", "runs", "-o", "json")
	mustCode(t, r, 0)
	var runs struct {
		Runs []struct {
			MessageID string `json:"messageId"`
			Routine   string `json:"routine"`
			Attempts  int    `json:"attempts"`
			Outcome   string `json:"outcome"`
		} `json:"runs"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &runs); err != nil {
		t.Fatalf("runs -o json: %v\n%s", err, r.stdout)
	}
	if len(runs.Runs) != 1 || runs.Runs[0].MessageID != id || runs.Runs[0].Routine != "develop" || runs.Runs[0].Attempts != 2 {
		t.Errorf("runs -o json = %+v", runs)
	}
	r = p.ctl("", "runs")
	mustCode(t, r, 0)
	contains(t, "runs", r.stdout, id)
	contains(t, "runs", r.stdout, "succeeded")

	r = p.ctl("", "logs", id)
	mustCode(t, r, 0)
	if r.stdout != "second try\n" {
		t.Errorf("logs = %q, want the latest attempt", r.stdout)
	}
	r = p.ctl("", "logs", "--attempt", "1", id)
	mustCode(t, r, 0)
	if r.stdout != "first try\n" {
		t.Errorf("logs --attempt 1 = %q", r.stdout)
	}
	r = p.ctl("", "logs", "2099010100000000-0")
	if r.code == 0 {
		t.Errorf("logs of an unknown id succeeded\n%s", r)
	}

	r = p.ctl("", "status")
	mustCode(t, r, 0)
	contains(t, "status", r.stdout, "0 queued, 1 done, 0 dead")
	contains(t, "status", r.stdout, p.dir)
	r = p.ctl("", "status", "-o", "json")
	mustCode(t, r, 0)
	var st map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &st); err != nil {
		t.Errorf("status -o json: %v\n%s", err, r.stdout)
	}

	r = p.ctl("", "routines", "-o", "json")
	mustCode(t, r, 0)
	contains(t, "routines", r.stdout, `"develop"`)
	var rs struct {
		Routines []struct {
			Name       string `json:"name"`
			Parameters []struct {
				Name       string `json:"name"`
				Default    string `json:"defaultValue"`
				HasDefault bool   `json:"hasDefault"`
				Standard   bool   `json:"standard"`
			} `json:"parameters"`
		} `json:"routines"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &rs); err != nil {
		t.Fatalf("routines -o json: %v\n%s", err, r.stdout)
	}
	var custom []string
	for _, rt := range rs.Routines {
		for _, prm := range rt.Parameters {
			if rt.Name == "develop" && !prm.Standard {
				custom = append(custom, fmt.Sprintf("%s=%q/%v", prm.Name, prm.Default, prm.HasDefault))
			}
		}
	}
	if got := strings.Join(custom, " "); got != `target_branch="main"/true base_dir=""/false` {
		t.Errorf("custom parameters of develop = %s; want a literal default and a computed one", got)
	}
	r = p.ctl("", "routines")
	mustCode(t, r, 0)
	contains(t, "routines", r.stdout, "target_branch=main base_dir=(computed)")
	// A routine file that cannot run says why.
	if !regexp.MustCompile(`(?m)^crlf +shell +shell +true +- +CANNOT RUN: routine crlf \(.*\) has Windows \(CRLF\) line endings \(first at line 1\)$`).MatchString(r.stdout) {
		t.Errorf("routines table does not flag the CRLF script:\n%s", r.stdout)
	}
	// A notebook's markdown heading is shown without its #s.
	if !regexp.MustCompile(`(?m)^review +notebook +notebook +true +reviewer=bob +Reviews a change$`).MatchString(r.stdout) {
		t.Errorf("routines table lacks the notebook row:\n%s", r.stdout)
	}

	r = p.ctl("", "runs", "-o", "yaml")
	mustCode(t, r, 2)
}

// hooks: beforeAll/afterAll/beforeEach/afterEach/onDeadLetter with their
// environment; onDeadLetter once per exhausted message and not after a
// failing beforeEach.
func hooks(t *testing.T, m mode) {
	p := newProject(t, m, `max_retries: 2
default_routine: develop
hooks:
  beforeAll: hook
  afterAll: hook
  beforeEach: hook
  afterEach: hook
  onDeadLetter: hook
`)
	p.routine("hook", "", `echo "$DECREE_HOOK trigger=$DECREE_TRIGGER attempt=${DECREE_ATTEMPT:-} max=${DECREE_MAX_ATTEMPTS:-} retries=${DECREE_MAX_RETRIES:-} exit=${DECREE_ROUTINE_EXIT_CODE:-} final=${DECREE_FINAL_ATTEMPT:-} id=$message_id" >> .decree/hooks.log
if [ "$DECREE_HOOK" = beforeEach ] && [ -f .decree/block ]; then echo "blocked by policy" >&2; exit 7; fi`)
	p.routine("develop", "", `grep -q SPAWN "$message_file" || exit 3
[ "$seq" != 0 ] || printf 'SPAWN next\n' > .decree/outbox/next.md`)

	mustCode(t, p.ctl("", "run", "-m", "ok", "-p", "SPAWN"), 0)
	runs := p.runs()
	if len(runs) != 2 {
		t.Fatalf("runs = %v", runs)
	}
	id0, id1 := runs[0], runs[1]
	want := []string{
		"beforeAll trigger=inbox attempt= max= retries= exit= final= id=",
		"beforeEach trigger=inbox attempt=1 max=2 retries=2 exit= final= id=" + id0,
		"afterEach trigger=inbox attempt=1 max=2 retries=2 exit=0 final=false id=" + id0,
		"beforeEach trigger=chain attempt=1 max=2 retries=2 exit= final= id=" + id1,
		"afterEach trigger=chain attempt=1 max=2 retries=2 exit=0 final=false id=" + id1,
		"afterAll trigger=inbox attempt= max= retries= exit= final= id=",
	}
	checkLines(t, p, want)

	p.write(".decree/hooks.log", "")
	mustCode(t, p.ctl("", "run", "-m", "bad", "-p", "FAIL"), 1)
	bad := p.runs()[2]
	want = []string{
		"beforeAll trigger=inbox attempt= max= retries= exit= final= id=",
		"beforeEach trigger=inbox attempt=1 max=2 retries=2 exit= final= id=" + bad,
		"afterEach trigger=inbox attempt=1 max=2 retries=2 exit=3 final=false id=" + bad,
		"beforeEach trigger=inbox attempt=2 max=2 retries=2 exit= final= id=" + bad,
		"afterEach trigger=inbox attempt=2 max=2 retries=2 exit=3 final=true id=" + bad,
		"onDeadLetter trigger=inbox attempt=2 max=2 retries=2 exit=3 final= id=" + bad,
		"afterAll trigger=inbox attempt= max= retries= exit= final= id=",
	}
	checkLines(t, p, want)

	// A failing beforeEach blocks the routine; the message dead-letters
	// with a note naming the hook, and onDeadLetter does not fire.
	p.write(".decree/hooks.log", "")
	p.write(".decree/block", "")
	r := p.ctl("", "run", "-m", "blocked", "-p", "SPAWN")
	mustCode(t, r, 1)
	log := p.read(".decree/hooks.log")
	notContains(t, "hooks.log", log, "onDeadLetter")
	notContains(t, "hooks.log", log, "afterEach")
	if strings.Count(log, "beforeEach") != 2 {
		t.Errorf("beforeEach ran %d times, want 2:\n%s", strings.Count(log, "beforeEach"), log)
	}
	note := p.read(".decree/inbox/dead/blocked.md.dead.txt")
	contains(t, "dead note", note, "beforeEach hook failed")
	if p.exists(".decree/outbox/next.md") || len(p.runs()) != 4 {
		t.Errorf("the blocked routine ran: runs %v", p.runs())
	}
}

func checkLines(t *testing.T, p *project, want []string) {
	t.Helper()
	got := strings.Split(strings.TrimSpace(p.read(".decree/hooks.log")), "\n")
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("hooks.log:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// routineSync: routine-sync registers new routines enabled, marks vanished
// ones deprecated, keeps the rest of config.yml (comments included), and
// a second run reports nothing to do.
func routineSync(t *testing.T, m mode) {
	p := newProject(t, m, "# keep this comment\nmax_retries: 2\nroutines:\n  develop:\n    enabled: true\n  gone:\n    enabled: true\n")
	p.routine("develop", "", "echo develop")
	p.routine("lint", "", "echo lint")
	r := p.ctl("", "routine-sync")
	mustCode(t, r, 0)
	contains(t, "stdout", r.stdout, "added       lint")
	contains(t, "stdout", r.stdout, "deprecated  gone")
	cfg := p.read(".decree/config.yml")
	for _, want := range []string{"# keep this comment", "max_retries: 2", "lint:", "deprecated: true"} {
		contains(t, "config.yml", cfg, want)
	}
	r = p.ctl("", "routines", "-o", "json")
	mustCode(t, r, 0)
	var list struct {
		Routines []struct {
			Name    string `json:"name"`
			Enabled bool   `json:"enabled"`
		} `json:"routines"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &list); err != nil {
		t.Fatalf("routines -o json: %v\n%s", err, r.stdout)
	}
	found := false
	for _, rt := range list.Routines {
		found = found || (rt.Name == "lint" && rt.Enabled)
	}
	if !found {
		t.Errorf("lint is not listed as enabled: %s", r.stdout)
	}
	r = p.ctl("", "routine-sync")
	mustCode(t, r, 0)
	contains(t, "stderr", r.stderr, "up to date")
	if got := p.read(".decree/config.yml"); got != cfg {
		t.Errorf("a second sync changed config.yml:\n%s", got)
	}
}
