package e2e

import (
	"os"
	"strings"
	"testing"
)

func osRename(a, b string) error { return os.Rename(a, b) }

// badFrontmatter: a malformed message dropped into the inbox is
// dead-lettered byte for byte with a note; a good one beside it runs.
func badFrontmatter(t *testing.T, m mode) {
	p := newProject(t, m, baseConfig)
	p.routine("develop", "", `echo ran >> ran.txt`)
	broken := "---\nroutine: [unclosed\n---\nbody\n"
	p.write(".decree/inbox/broken.md", broken)
	p.write(".decree/inbox/fine.md", "---\nroutine: develop\n---\nfine\n")
	r := p.ctl("", "process")
	mustCode(t, r, 1)
	if got := p.read(".decree/inbox/dead/broken.md"); got != broken {
		t.Errorf("dead letter changed: %q", got)
	}
	note := p.read(".decree/inbox/dead/broken.md.dead.txt")
	contains(t, "dead note", note, "reason: InvalidMessage")
	contains(t, "stderr", r.stderr, "broken")
	if !p.exists(".decree/inbox/done/fine.md") {
		t.Errorf("the good message did not run: done %v\n%s", p.messages(".decree/inbox/done"), r)
	}
	p.sameTree(map[string]string{"ran.txt": "ran\n"})
}

// badUnknownRoutine: a routine that does not exist dead-letters the
// message with RoutineNotFound before anything runs.
func badUnknownRoutine(t *testing.T, m mode) {
	p := newProject(t, m, baseConfig)
	p.routine("develop", "", `echo ran > ran.txt`)
	// decreectl run is refused before anything is queued, naming the
	// routines there are.
	r := p.ctl("", "run", "-m", "u", "-p", "x", "-v", "routine=nope")
	mustCode(t, r, 1)
	contains(t, "stderr", r.stderr, `routine "nope" does not exist; available routines: develop`)
	if len(p.messages(".decree/inbox")) != 0 || len(p.messages(".decree/inbox/dead")) != 0 {
		t.Errorf("a refused run left messages: inbox %v, dead %v", p.messages(".decree/inbox"), p.messages(".decree/inbox/dead"))
	}
	// A file dropped into the inbox by hand cannot be refused: it is
	// dead-lettered with a note.
	p.write(".decree/inbox/u.md", "---\nroutine: nope\n---\nx\n")
	r = p.ctl("", "process")
	note := p.read(".decree/inbox/dead/u.md.dead.txt")
	contains(t, "dead note", note, "reason: RoutineNotFound")
	contains(t, "dead note", note, "nope")
	p.sameTree(map[string]string{})
	if len(p.runs()) != 0 {
		t.Errorf("runs = %v", p.runs())
	}
}

// badRoutineFiles: a routine file no attempt could run (CRLF line endings,
// a notebook that is not JSON) dead-letters the message with InvalidRoutine
// before the first attempt, with a note that says how to fix the file.
func badRoutineFiles(t *testing.T, m mode) {
	p := newProject(t, m, baseConfig+"notebook_support: true\n")
	p.write(".decree/routines/crlf.sh", "#!/usr/bin/env bash\r\necho ran > ran.txt\r\n")
	p.write(".decree/routines/torn.ipynb", `{"cells": [`)
	cases := []struct{ name, routine, want string }{
		{"c", "crlf", "dos2unix"},
		{"n", "torn", "not a valid notebook"},
	}
	for _, c := range cases {
		r := p.ctl("", "run", "-m", c.name, "-p", "x", "-v", "routine="+c.routine)
		mustCode(t, r, 1)
		note := p.read(".decree/inbox/dead/" + c.name + ".md.dead.txt")
		contains(t, "dead note", note, "reason: InvalidRoutine")
		contains(t, "dead note", note, c.want)
		contains(t, "dead note", note, "requeue")
		if strings.Contains(r.stderr, "attempt 1") {
			t.Errorf("routine %s was attempted:\n%s", c.routine, r.stderr)
		}
	}
	p.sameTree(map[string]string{})
	if len(p.runs()) != 0 {
		t.Errorf("runs = %v", p.runs())
	}
}

// badNoCapableWorker: decreectl's own worker is the only one there will
// be, so a routine it cannot run (a driver it lacks, labels it does not
// have) dead-letters at once with a note saying what to add.
func badNoCapableWorker(t *testing.T, m mode) {
	p := newProject(t, m, baseConfig+`routines:
  gpu-job:
    requires:
      gpu: "yes"
`)
	p.write(".decree/routines/decide.tree.csv", "question,yes,no\n")
	p.routine("gpu-job", "", `echo ran > ran.txt`)
	cases := []struct {
		name, routine, reason string
		want                  []string
	}{
		{"t", "decide", "NoCapableWorker", []string{`no connected worker offers driver "tree"`, "decree-driver-tree", ".decree/drivers/"}},
		{"g", "gpu-job", "NoCapableWorker", []string{"has the labels gpu=yes", "routines.gpu-job.requires"}},
	}
	if m == binary {
		// The built decreectl has decree-driver-tree beside it (as `make
		// build` lays them out): the tree can run, but this one is no
		// Lucid export, so it is dead-lettered as invalid at once.
		cases[0].reason, cases[0].want = "InvalidRoutine", []string{"decide.tree.csv", "missing column(s) Id, Name"}
	}
	for _, c := range cases {
		r := p.ctl("", "run", "-m", c.name, "-p", "x", "-v", "routine="+c.routine)
		mustCode(t, r, 1)
		note := p.read(".decree/inbox/dead/" + c.name + ".md.dead.txt")
		contains(t, "dead note", note, "reason: "+c.reason)
		for _, w := range c.want {
			contains(t, "dead note", note, w)
		}
	}
	p.sameTree(map[string]string{})
	if len(p.runs()) != 0 {
		t.Errorf("runs = %v", p.runs())
	}
}

// badArguments: bad -m and -v are refused with exit 2 and nothing queued.
func badArguments(t *testing.T, m mode) {
	p := newProject(t, m, baseConfig)
	p.routine("develop", "", `echo ran > ran.txt`)
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"run", "-m", "../x", "-p", "x"}, "../x"},
		{[]string{"run", "-m", "a/b", "-p", "x"}, "a/b"},
		{[]string{"run", "-p", "x", "-v", "1bad=x"}, "1bad"},
		{[]string{"run", "-p", "x", "-v", "novalue"}, "KEY=VALUE"},
		{[]string{"run", "-p", "x", "-v", "id=5"}, "derived"},
		{[]string{"run", "-p", "x", "-v", "a=1", "-v", "a=2"}, "twice"},
		{[]string{"run", "--no-such-flag"}, "no-such-flag"},
	}
	for _, c := range cases {
		r := p.ctl("", c.args...)
		if r.code != 2 {
			t.Errorf("want exit 2\n%s", r)
		}
		contains(t, "stderr", r.stderr, c.want)
	}
	// A body over the message size limit is refused before anything is
	// sent, with a way out.
	r := p.ctl(strings.Repeat("x", 70<<20), "run", "-m", "huge")
	if r.code != 2 {
		t.Errorf("a 70 MB body: want exit 2\n%s", r.stderr)
	}
	contains(t, "stderr", r.stderr, "over 63 MiB")
	contains(t, "stderr", r.stderr, "input_file")
	if n := len(p.messages(".decree/inbox")) + len(p.messages(".decree/inbox/dead")) + len(p.runs()); n != 0 {
		t.Errorf("bad arguments queued something: inbox %v dead %v runs %v", p.messages(".decree/inbox"), p.messages(".decree/inbox/dead"), p.runs())
	}
	p.sameTree(map[string]string{})
}

// badFollowUps: a follow-up of another chain written into the inbox, a
// symlink in the outbox, and a file written to .decree/outbox/../ are
// rejected or ignored; the message itself completes.
func badFollowUps(t *testing.T, m mode) {
	p := newProject(t, m, baseConfig)
	outside := p.path("../" + strings.TrimPrefix(p.dir, "/") + "-secret.md")
	_ = outside
	p.routine("develop", "", `[ "$seq" = 0 ] || { echo "follow-up $message_id ran" >> .decree/ran.log; exit 0; }
printf 'other chain\n' > .decree/inbox/1111111111111111-1.md
printf 'escape\n' > .decree/outbox/../x.md
ln -s /etc/hostname .decree/outbox/evil.md
printf 'good one\n' > .decree/outbox/good.md
echo main > main.txt`)
	r := p.ctl("", "run", "-m", "parent", "-p", "x")
	mustCode(t, r, 1) // a rejected follow-up counts as a dead letter of the chain
	if !p.exists(".decree/inbox/done/parent.md") {
		t.Fatalf("parent not done: %v\n%s", p.messages(".decree/inbox/done"), r)
	}
	// Each rejected follow-up is dead-lettered as a message of its own,
	// with an id of the parent's chain that no other message has.
	other, evil := p.deadFollowUp("inbox/1111111111111111-1.md"), p.deadFollowUp("outbox/evil.md")
	contains(t, "note", p.read(".decree/inbox/dead/"+other+".dead.txt"), "reason: InvalidFollowUp")
	contains(t, "note", p.read(".decree/inbox/dead/"+other+".dead.txt"), "belongs to chain 1111111111111111")
	contains(t, "note", p.read(".decree/inbox/dead/"+evil+".dead.txt"), "not a regular file")
	parentChain := p.doneChain("parent")
	if other == evil || !strings.HasPrefix(other, parentChain+"-") || !strings.HasPrefix(evil, parentChain+"-") ||
		other == parentChain+"-0.md" || evil == parentChain+"-0.md" {
		t.Errorf("rejected follow-ups dead-lettered as %s and %s; want own ids in chain %s", other, evil, parentChain)
	}
	contains(t, "note", p.read(".decree/inbox/dead/"+other+".dead.txt"), "message_id: "+strings.TrimSuffix(other, ".md"))
	ran := p.read(".decree/ran.log")
	if strings.Count(ran, "ran") != 1 {
		t.Errorf("follow-ups that ran:\n%s", ran)
	}
	if p.exists(".decree/inbox/x.md") || strings.Contains(ran, "x.md") {
		t.Errorf("a file written outside the outbox became a message")
	}
	p.sameTree(map[string]string{"main.txt": "main\n"})
}

// deadFollowUp returns the dead/ file name of the rejected follow-up that
// came from source ("inbox/NAME" or "outbox/NAME").
func (p *project) deadFollowUp(source string) string {
	p.t.Helper()
	for _, f := range p.list(".decree/inbox/dead") {
		if strings.HasSuffix(f, ".dead.txt") && strings.Contains(p.read(".decree/inbox/dead/"+f), "Follow-up "+source+" ") {
			return strings.TrimSuffix(f, ".dead.txt")
		}
	}
	p.t.Fatalf("no dead letter for follow-up %s in %v", source, p.list(".decree/inbox/dead"))
	return ""
}

// doneChain returns the chain of the done message named name.
func (p *project) doneChain(name string) string {
	p.t.Helper()
	for _, line := range strings.Split(p.read(".decree/inbox/done/"+name+".md"), "\n") {
		if c, ok := strings.CutPrefix(line, "chain: "); ok {
			return strings.Trim(c, `"' `)
		}
	}
	p.t.Fatalf("done/%s.md has no chain", name)
	return ""
}

// badMissingSpec: an input_file that does not exist is refused before
// queueing (run) or dead-letters the message (dropped into the inbox).
func badMissingSpec(t *testing.T, m mode) {
	p := newProject(t, m, baseConfig)
	p.routine("develop", "", `echo ran > ran.txt`)
	r := p.ctl("", "run", "-v", "input_file=specs/nope.spec.md")
	mustCode(t, r, 2)
	contains(t, "stderr", r.stderr, "specs/nope.spec.md")
	r = p.ctl("", "run", "-v", "input_file=../../etc/passwd")
	mustCode(t, r, 2)
	contains(t, "stderr", r.stderr, "inside the project")
	if len(p.messages(".decree/inbox")) != 0 {
		t.Errorf("inbox = %v", p.messages(".decree/inbox"))
	}
	p.write(".decree/inbox/ghost.md", "---\ninput_file: specs/ghost.spec.md\n---\n")
	r = p.ctl("", "process")
	mustCode(t, r, 1)
	note := p.read(".decree/inbox/dead/ghost.md.dead.txt")
	contains(t, "dead note", note, "reason: InputFileNotFound")
	contains(t, "dead note", note, "specs/ghost.spec.md")
	p.sameTree(map[string]string{})
}

// badSignal: a routine killed by a signal is a failed attempt that says
// so; exhausted, the message is dead-lettered and the tree reverted.
func badSignal(t *testing.T, m mode) {
	p := newProject(t, m, "max_retries: 2\ndefault_routine: develop\n")
	p.routine("develop", "", `echo partial > partial.txt
kill -KILL $$`)
	r := p.ctl("", "run", "-m", "sig", "-p", "x")
	mustCode(t, r, 1)
	rj := p.runJSON(p.onlyRun())
	if rj.Attempts != 2 || len(rj.Details) != 2 {
		t.Fatalf("run.json = %+v", rj)
	}
	if e := strings.ToLower(rj.Details[0].Error); !strings.Contains(e, "signal") && !strings.Contains(e, "kill") {
		t.Errorf("attempt error %q does not mention the signal", rj.Details[0].Error)
	}
	contains(t, "dead note", p.read(".decree/inbox/dead/sig.md.dead.txt"), "reason: RetriesExhausted")
	p.sameTree(map[string]string{})
}
