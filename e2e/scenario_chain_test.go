package e2e

import (
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/decreehq/decree/internal/testtool"
)

// depthFirst: follow-ups (written to the inbox and to the outbox) run
// depth-first: -0, -1, -2, -3 before a message another chain queued
// meanwhile, and before the next migration.
func depthFirst(t *testing.T, m mode) {
	p := newProject(t, m, baseConfig)
	p.routine("develop", "", `echo "$message_id" >> .decree/order.log
case "$spec_file:$seq" in
  *01-first.spec.md:0)
    printf 'dropped in by hand\n' > .decree/inbox/other.md
    printf -- '---\nroutine: develop\n---\nstep one\n' > ".decree/inbox/${chain}-1.md" ;;
  :1) printf 'step two\n' > .decree/outbox/next.md ;;
  :2) printf 'step three\n' > ".decree/inbox/${chain}-3.md" ;;
esac`)
	p.write(".decree/migrations/01-first.spec.md", "# First\n")
	p.write(".decree/migrations/02-second.spec.md", "# Second\n")
	r := p.ctl("", "process")
	mustCode(t, r, 0)

	order := strings.Fields(p.read(".decree/order.log"))
	if len(order) != 6 {
		t.Fatalf("order = %v, want 6 messages\n%s", order, r)
	}
	a := strings.TrimSuffix(order[0], "-0")
	for i := 0; i < 4; i++ {
		if want := a + "-" + string(rune('0'+i)); order[i] != want {
			t.Errorf("order[%d] = %s, want %s (order %v)", i, order[i], want, order)
		}
	}
	if strings.HasPrefix(order[4], a) || strings.HasPrefix(order[5], a) {
		t.Errorf("another chain ran inside chain %s: %v", a, order)
	}
	// other.md (queued during -0) ran after the chain, then migration 02.
	done := p.messages(".decree/inbox/done")
	for _, f := range []string{"01-first.md", "02-second.md", "other.md", a + "-1.md", a + "-2.md", a + "-3.md"} {
		if !contains1(done, f) {
			t.Errorf("done = %v, missing %s", done, f)
		}
	}
	if rj := p.runJSON(order[5]); rj.Migration != "02-second.spec.md" {
		t.Errorf("last run %s is %+v, want migration 02", order[5], rj)
	}
	var prev time.Time
	for _, id := range order[:4] {
		rj := p.runJSON(id)
		if id != a+"-0" && rj.Trigger != "chain" {
			t.Errorf("%s trigger = %q, want chain", id, rj.Trigger)
		}
		start, err := time.Parse(time.RFC3339Nano, rj.Start)
		if err != nil {
			t.Fatalf("run.json start %q: %v", rj.Start, err)
		}
		if start.Before(prev) {
			t.Errorf("%s started before its predecessor", id)
		}
		prev = start
	}
	contains(t, "outbox follow-up", p.read(".decree/inbox/done/"+a+"-2.md"), "step two")
}

func contains1(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// maxDepth: a message with seq >= max_depth is dead-lettered with a note
// and never runs; run exits 1.
func maxDepth(t *testing.T, m mode) {
	p := newProject(t, m, baseConfig+"max_depth: 2\n")
	p.routine("develop", "", `printf 'deeper\n' > ".decree/inbox/${chain}-$((seq + 1)).md"`)
	r := p.ctl("", "run", "-m", "deep", "-p", "go")
	mustCode(t, r, 1)
	runs := p.runs()
	if len(runs) != 2 || !strings.HasSuffix(runs[0], "-0") || !strings.HasSuffix(runs[1], "-1") {
		t.Fatalf("runs = %v, want -0 and -1 only", runs)
	}
	chain := strings.TrimSuffix(runs[0], "-0")
	dead := p.messages(".decree/inbox/dead")
	if len(dead) != 1 || dead[0] != chain+"-2.md" {
		t.Fatalf("dead = %v, want %s-2.md", dead, chain)
	}
	contains(t, "dead note", p.read(".decree/inbox/dead/"+chain+"-2.md.dead.txt"), "reason: MaxDepthExceeded")
	contains(t, "stderr", r.stderr, "MaxDepthExceeded")
}

// retryExhaustion: spec 07's retry rules and spec 04's revert, without
// .git and with .gitignore honoured.
func retryExhaustion(t *testing.T, m mode) {
	p := newProject(t, m, baseConfig)
	orig := map[string]string{
		"keep.txt": "keep\n", "doomed.txt": "doomed\n", "work.txt": "v0\n",
		".gitignore": "build/\n*.log\n", "build/cache.bin": "cache", "debug.log": "x",
	}
	for k, v := range orig {
		p.write(k, v)
	}
	p.routine("develop", "", `yn() { [ -e "$1" ] && echo yes || echo no; }
echo "attempt=$DECREE_ATTEMPT/$DECREE_MAX_ATTEMPTS work=$(tr '\n' , < work.txt) doomed=$(yn doomed.txt) new1=$(yn new-1.txt) fc=$(yn "$message_dir/failure-context.md")" >> .decree/obs.log
echo "v$DECREE_ATTEMPT" >> work.txt
echo "new $DECREE_ATTEMPT" > "new-$DECREE_ATTEMPT.txt"
rm -f doomed.txt
echo ignored > "build/out-$DECREE_ATTEMPT.bin"
echo "failing on attempt $DECREE_ATTEMPT" >&2
exit 1`)
	r := p.ctl("", "run", "-m", "doomed", "-p", "try hard")
	mustCode(t, r, 1)
	contains(t, "stderr", r.stderr, "dead-lettered")

	obs := strings.Split(strings.TrimSpace(p.read(".decree/obs.log")), "\n")
	want := []string{
		"attempt=1/3 work=v0, doomed=yes new1=no fc=no",
		"attempt=2/3 work=v0,v1, doomed=no new1=yes fc=no", // no revert after attempt 1
		"attempt=3/3 work=v0, doomed=yes new1=no fc=yes",   // reverted before the last attempt
	}
	if strings.Join(obs, "\n") != strings.Join(want, "\n") {
		t.Errorf("what the attempts saw:\n%s\nwant:\n%s", strings.Join(obs, "\n"), strings.Join(want, "\n"))
	}

	// Exhausted: reverted (new files gone, deleted file back), ignored
	// files untouched, no .git needed.
	after := map[string]string{}
	for k, v := range orig {
		after[k] = v
	}
	for _, n := range []string{"1", "2", "3"} {
		after["build/out-"+n+".bin"] = "ignored\n"
	}
	p.sameTree(after)
	if p.exists(".git") {
		t.Errorf("a .git directory appeared")
	}
	// The deleted file comes back with its permission bits (not 000).
	if fi, err := os.Stat(p.path("doomed.txt")); err != nil || fi.Mode().Perm() != 0o644 {
		t.Errorf("doomed.txt after the revert: %v, %v; want permission 0644", fi.Mode(), err)
	}

	id := p.onlyRun()
	dir := ".decree/runs/" + id + "/"
	for _, f := range []string{"message.md", "manifest.json", "changes.diff", "changes.try-001.diff", "changes.try-002.diff",
		"changes.try-003.diff", "routine.log", "routine.try-002.log", "routine.try-003.log", "failure-context.md", "run.json"} {
		if !p.exists(dir + f) {
			t.Errorf("%s%s missing (have %v)", dir, f, p.list(dir))
		}
	}
	contains(t, "routine.log", p.read(dir+"routine.log"), "failing on attempt 1")
	contains(t, "routine.try-003.log", p.read(dir+"routine.try-003.log"), "failing on attempt 3")

	man := p.manifest(id)
	for _, f := range []string{"keep.txt", "doomed.txt", "work.txt", ".gitignore"} {
		if e, ok := man[f]; !ok || e.SHA256 != sha(orig[f]) {
			t.Errorf("manifest %s = %+v, want sha %s", f, e, sha(orig[f]))
		}
	}
	for _, f := range []string{"build/cache.bin", "debug.log"} {
		if _, ok := man[f]; ok {
			t.Errorf("manifest lists ignored %s", f)
		}
	}

	d1 := p.read(dir + "changes.try-001.diff")
	contains(t, "attempt 1 diff", d1, "+++ b/new-1.txt")
	contains(t, "attempt 1 diff", d1, "--- a/doomed.txt")
	contains(t, "attempt 1 diff", d1, "+v1")
	notContains(t, "attempt 1 diff", d1, "build/")
	contains(t, "attempt 2 diff (cumulative)", p.read(dir+"changes.try-002.diff"), "+++ b/new-1.txt")
	last := p.read(dir + "changes.diff")
	contains(t, "changes.diff", last, "+++ b/new-3.txt")
	notContains(t, "changes.diff", last, "new-1.txt")

	fc := p.read(dir + "failure-context.md")
	contains(t, "failure-context.md", fc, "attempt 1")
	contains(t, "failure-context.md", fc, "attempt 2")
	contains(t, "failure-context.md", fc, "failing on attempt 2")

	if dead := p.messages(".decree/inbox/dead"); len(dead) != 1 || dead[0] != "doomed.md" {
		t.Fatalf("dead = %v", dead)
	}
	note := p.read(".decree/inbox/dead/doomed.md.dead.txt")
	contains(t, "dead note", note, "reason: RetriesExhausted")
	contains(t, "dead note", note, "message_id: "+id)
	rj := p.runJSON(id)
	if rj.Attempts != 3 || rj.ExitCode != 1 || rj.Outcome != "dead_lettered" || len(rj.Details) != 3 {
		t.Errorf("run.json = %+v", rj)
	}

	// changes.diff is a patch standard tools accept on the reverted tree.
	if _, err := p.git(last, "apply", "--check", "-"); err != nil {
		testtool.Require(t, "git")
		out, _ := p.git(last, "apply", "--check", "-")
		t.Errorf("git apply --check rejects changes.diff: %s", out)
	}
}

// retrySucceeds: a failure that the second attempt fixes ends in done/
// with both attempts' work in changes.diff and no failure context.
func retrySucceeds(t *testing.T, m mode) {
	p := newProject(t, m, baseConfig)
	p.routine("develop", "", `if [ ! -f draft.txt ]; then echo draft > draft.txt; exit 1; fi
echo final > final.txt`)
	r := p.ctl("", "run", "-m", "flaky", "-p", "x")
	mustCode(t, r, 0)
	id := p.onlyRun()
	rj := p.runJSON(id)
	if rj.Attempts != 2 || rj.Outcome != "succeeded" {
		t.Errorf("run.json = %+v", rj)
	}
	diff := p.read(".decree/runs/" + id + "/changes.diff")
	contains(t, "changes.diff", diff, "+++ b/draft.txt")
	contains(t, "changes.diff", diff, "+++ b/final.txt")
	if p.exists(".decree/runs/" + id + "/failure-context.md") {
		t.Errorf("failure-context.md written although attempt 3 never ran")
	}
	p.sameTree(map[string]string{"draft.txt": "draft\n", "final.txt": "final\n"})
}

// perRoutineLimits: routines.<name>.max_retries and timeout_s override the
// global settings; a timeout is a failed attempt with exit code 1.
func perRoutineLimits(t *testing.T, m mode) {
	p := newProject(t, m, baseConfig+`routines:
  slow:
    timeout_s: 1
    max_retries: 1
  twice:
    max_attempts: 2
`)
	p.routine("slow", "", `echo sleeping; sleep 30; echo woke > woke.txt`)
	p.routine("twice", "", `exit 4`)
	start := time.Now()
	r := p.ctl("", "run", "-m", "slow", "-p", "x", "-v", "routine=slow")
	mustCode(t, r, 1)
	if d := time.Since(start); d > 20*time.Second {
		t.Errorf("timeout_s: 1 took %s", d)
	}
	var slowID, twiceID string
	for _, id := range p.runs() {
		slowID = id
	}
	rj := p.runJSON(slowID)
	if rj.Attempts != 1 || rj.MaxAttempts != 1 || len(rj.Details) != 1 || rj.Details[0].ExitCode != 1 {
		t.Errorf("timed-out run.json = %+v", rj)
	}
	if len(rj.Details) == 1 {
		contains(t, "attempt error", strings.ToLower(rj.Details[0].Error), "timed out")
	}
	r = p.ctl("", "run", "-m", "twice", "-p", "x", "-v", "routine=twice")
	mustCode(t, r, 1)
	for _, id := range p.runs() {
		if id != slowID {
			twiceID = id
		}
	}
	rj = p.runJSON(twiceID)
	if rj.Attempts != 2 || rj.MaxAttempts != 2 || rj.ExitCode != 4 {
		t.Errorf("twice run.json = %+v", rj)
	}
	if p.exists("woke.txt") {
		t.Errorf("the timed-out routine kept running")
	}
}

const migrationRoutine = `if grep -q FAIL "$spec_file"; then echo partial > partial.txt; exit 1; fi
echo ok > "$(basename "$spec_file" .spec.md).out"`

// processStop: with on_migration_failure: stop (default), process stops at
// the dead-lettered migration and exits 1.
func processStop(t *testing.T, m mode) {
	p := newProject(t, m, "max_retries: 1\ndefault_routine: develop\n")
	p.routine("develop", "", migrationRoutine)
	p.write(".decree/migrations/01-first.spec.md", "# First\nFAIL\n")
	p.write(".decree/migrations/02-second.spec.md", "# Second\n")
	r := p.ctl("", "process")
	mustCode(t, r, 1)
	contains(t, "stderr", r.stderr, "on_migration_failure: stop")
	if len(p.runs()) != 1 {
		t.Errorf("runs = %v, want only the first migration", p.runs())
	}
	if p.exists(".decree/processed.md") && strings.Contains(p.read(".decree/processed.md"), "02-second") {
		t.Errorf("02 processed although process should have stopped")
	}
	p.sameTree(map[string]string{})
	if !p.exists(".decree/inbox/dead/01-first.md") {
		t.Errorf("dead = %v", p.messages(".decree/inbox/dead"))
	}
	// --dry-run lists both as pending, with their routine (which has no
	// pre-check, so it counts as ready), and changes nothing.
	r = p.ctl("", "process", "--dry-run")
	mustCode(t, r, 0)
	for _, f := range []string{"01-first.spec.md", "02-second.spec.md"} {
		if !regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(f) + ` +develop +PASS \(no pre-check\)$`).MatchString(r.stdout) {
			t.Errorf("dry run lacks %s with develop and PASS:\n%s", f, r.stdout)
		}
	}
}

// processContinue: with on_migration_failure: continue, process goes on to
// the next migration and still exits 1.
func processContinue(t *testing.T, m mode) {
	p := newProject(t, m, "max_retries: 1\ndefault_routine: develop\non_migration_failure: continue\n")
	p.routine("develop", "", migrationRoutine)
	p.write(".decree/migrations/01-first.spec.md", "# First\nFAIL\n")
	p.write(".decree/migrations/02-second.spec.md", "# Second\n")
	r := p.ctl("", "process")
	mustCode(t, r, 1)
	if len(p.runs()) != 2 {
		t.Errorf("runs = %v, want both migrations", p.runs())
	}
	processed := p.read(".decree/processed.md")
	contains(t, "processed.md", processed, "02-second.spec.md")
	notContains(t, "processed.md", processed, "01-first.spec.md")
	p.sameTree(map[string]string{"02-second.out": "ok\n"})
}

// discardOnlyFollowUps: a failed attempt's follow-ups (<chain>-<seq>.md in
// the inbox, anything in the outbox) are kept in the run directory and never
// run, but a message dropped into the inbox by hand (or by another tool)
// while the attempt ran is not the attempt's: it stays queued.
func discardOnlyFollowUps(t *testing.T, m mode) {
	p := newProject(t, m, baseConfig)
	p.routine("develop", "", `if [ "$seq" = 0 ] && [ ! -f tried.txt ]; then
  echo once > tried.txt
  printf 'follow-up of the failed attempt\n' > ".decree/inbox/${chain}-1.md"
  printf 'from the outbox\n' > .decree/outbox/next.md
  printf 'dropped in by hand\n' > .decree/inbox/by-hand.md
  exit 1
fi`)
	r := p.ctl("", "run", "-m", "flaky", "-p", "x")
	mustCode(t, r, 0)
	var id string
	for _, run := range p.runs() {
		if p.runJSON(run).Attempts == 2 {
			id = run
		}
	}
	if id == "" {
		t.Fatalf("no run took two attempts: %v\n%s", p.runs(), r)
	}
	chain := strings.TrimSuffix(id, "-0")
	kept := p.messages(".decree/runs/" + id + "/discarded-followups/try-001")
	if !contains1(kept, chain+"-1.md") || !contains1(kept, "next.md") || contains1(kept, "by-hand.md") {
		t.Errorf("discarded-followups/try-001 = %v, want %s-1.md and next.md, not by-hand.md", kept, chain)
	}
	if !contains1(p.messages(".decree/inbox"), "by-hand.md") && !contains1(p.messages(".decree/inbox/done"), "by-hand.md") {
		t.Errorf("by-hand.md was lost: inbox %v, done %v", p.messages(".decree/inbox"), p.messages(".decree/inbox/done"))
	}
}
