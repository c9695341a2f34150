package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/decreehq/decree/internal/testtool"
	decreev1 "github.com/decreehq/decree/proto/decree/v1"
)

// open lets gated messages of gate g go on (retry 0 or 1).
func (e *lanesEnv) open(t *testing.T, g string, retry int) {
	t.Helper()
	if err := os.WriteFile(fmt.Sprintf("%s.%s.%d", e.ledger, g, retry), nil, 0o644); err != nil {
		t.Fatal(err)
	}
}

// started reports whether a message of chain name started (per the ledger).
func (e *lanesEnv) started(t *testing.T, name string, seq int) string {
	for _, line := range strings.Split(readFile(t, e.ledger), "\n") {
		f := strings.Fields(line)
		if len(f) == 4 && f[2] == "start" && f[3] == name && strings.HasSuffix(f[0], fmt.Sprintf("-%d", seq)) {
			return f[0]
		}
	}
	return ""
}

// ends counts "end" lines per message id.
func (e *lanesEnv) ends(t *testing.T) map[string]int {
	out := map[string]int{}
	for _, line := range strings.Split(readFile(t, e.ledger), "\n") {
		if f := strings.Fields(line); len(f) == 4 && f[2] == "end" {
			out[f[0]]++
		}
	}
	return out
}

// chainOf is the chain of message id.
func chainOf(id string) string { return id[:strings.LastIndex(id, "-")] }

// event reports whether events.jsonl has an event of kind for chain.
func (e *lanesEnv) event(kind, chain string) bool {
	data, _ := os.ReadFile(e.p.path(".decree/events.jsonl"))
	for _, line := range strings.Split(string(data), "\n") {
		if strings.Contains(line, `"kind":"`+kind+`"`) && strings.Contains(line, `"chain":"`+chain+`"`) {
			return true
		}
	}
	return false
}

func (e *lanesEnv) waitEvent(t *testing.T, kind, chain string) {
	t.Helper()
	for deadline := time.Now().Add(60 * time.Second); !e.event(kind, chain); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no %s event of chain %s within 60s; events:\n%s", kind, chain, e.p.read(".decree/events.jsonl"))
		}
	}
}

// mergeOf is run.json's merge record of id.
func (e *lanesEnv) mergeOf(t *testing.T, id string) map[string]any {
	rec := readJSON(t, e.p.path(".decree/runs/"+id+"/run.json"))
	m, _ := rec["merge"].(map[string]any)
	return m
}

// exactlyOnce checks every message in the ledger started and ended once.
func (e *lanesEnv) exactlyOnce(t *testing.T, want int) {
	t.Helper()
	runs, ends := e.ledgerRuns(t), e.ends(t)
	if len(runs) != want {
		t.Errorf("ledger has %d messages, want %d:\n%s", len(runs), want, readFile(t, e.ledger))
	}
	for id, n := range runs {
		if n != 1 || ends[id] != 1 {
			t.Errorf("message %s started %d and ended %d times", id, n, ends[id])
		}
	}
}

func line2(t *testing.T, p *project) string {
	lines := strings.Split(p.read("shared.txt"), "\n")
	if len(lines) < 2 {
		t.Fatalf("shared.txt = %q", p.read("shared.txt"))
	}
	return lines[1]
}

// startConflict runs chains x and y side by side, both changing line 2 of
// shared.txt, and lets x merge first; y is then held at its gate.
func startConflict(t *testing.T, e *lanesEnv) (x, y string) {
	p := e.p
	p.write(".decree/inbox/x.md", "file=x shared=xv gate=x\n")
	p.write(".decree/inbox/y.md", "file=y shared=yv gate=y\n")
	testtool.WaitFor(t, 60*time.Second, "both chains to start", func() bool {
		return e.started(t, "x", 0) != "" && e.started(t, "y", 0) != ""
	})
	x, y = chainOf(e.started(t, "x", 0)), chainOf(e.started(t, "y", 0))
	e.open(t, "x", 0)
	e.waitEvent(t, "chain_merged", x)
	e.open(t, "y", 0)
	e.waitEvent(t, "merge_conflict", y)
	return x, y
}

// retryChain is the chain requeued for y, from y's run.json.
func (e *lanesEnv) retryChain(t *testing.T, y string) string {
	m := e.mergeOf(t, y+"-0")
	if m == nil || m["result"] != "conflict" || m["requeued_as"] == "" {
		t.Fatalf("merge of %s-0 = %v, want a conflict requeued", y, m)
	}
	return m["requeued_as"].(string)
}

// TestParallelConflictRequeueThenSuccess: two chains change one line; the
// second to finish conflicts, nothing of it is applied, it runs again as a
// new chain on the merged tree and merges.
func TestParallelConflictRequeueThenSuccess(t *testing.T) {
	t.Parallel()
	e := newLanes(t, 2, 2, "")
	p := e.p
	x, y := startConflict(t, e)
	if got := line2(t, p); got != "xv" {
		t.Errorf("after the conflict line 2 = %q, want x's xv (nothing of y applied)", got)
	}
	if p.exists("out/y.txt") {
		t.Error("the conflicting chain's files reached the project tree")
	}
	y2 := e.retryChain(t, y)
	e.open(t, "y", 1)
	e.waitIdle(t, 9)
	e.exactlyOnce(t, 9)
	if got := line2(t, p); got != "yv" {
		t.Errorf("line 2 = %q, want yv from the requeued chain", got)
	}
	if m := e.mergeOf(t, y2+"-0"); m == nil || m["result"] != "merged" {
		t.Errorf("merge of the requeued chain = %v", m)
	}
	if m := e.mergeOf(t, x+"-2"); m == nil || m["result"] != "merged" || m["order"].(float64) != 1 {
		t.Errorf("merge of %s = %v, want merged first", x, m)
	}
	contains(t, "requeued chain's first message", p.read(".decree/inbox/done/y-retry.md"), `merge_retry_of: "`+y+`"`)
	// The tree is what applying x, then the requeued y, gives.
	want := map[string]string{"out/x.txt": ids(x), "out/y.txt": ids(y2)}
	for k := 0; k < 3; k++ {
		want[fmt.Sprintf("out/x-%d.txt", k)] = fmt.Sprintf("%s-%d\n", x, k)
		want[fmt.Sprintf("out/y-%d.txt", k)] = fmt.Sprintf("%s-%d\n", y2, k)
	}
	for path, body := range want {
		if got := p.read(path); got != body {
			t.Errorf("%s = %q, want %q", path, got, body)
		}
	}
	if got := p.messages(".decree/inbox/dead"); len(got) != 0 {
		t.Errorf("dead = %v", got)
	}
	e.mergeOrderTree(t, initialTree)
}

func ids(chain string) string {
	return fmt.Sprintf("%s-0\n%s-1\n%s-2\n", chain, chain, chain)
}

// TestParallelDoubleConflictDeadLetters: the requeued chain conflicts again
// (a third chain merged the same line meanwhile): its first message is
// dead-lettered with a note naming the file, nothing of it is applied.
func TestParallelDoubleConflictDeadLetters(t *testing.T) {
	t.Parallel()
	e := newLanes(t, 2, 2, "")
	p := e.p
	_, y := startConflict(t, e)
	y2 := e.retryChain(t, y)
	testtool.WaitFor(t, 60*time.Second, "the requeued chain to start", func() bool { return e.started(t, "y", 0) != "" && e.ledgerRuns(t)[y2+"-0"] == 1 })
	p.write(".decree/inbox/w.md", "file=w shared=wv\n")
	testtool.WaitFor(t, 60*time.Second, "chain w to start", func() bool { return e.started(t, "w", 0) != "" })
	w := chainOf(e.started(t, "w", 0))
	e.waitEvent(t, "chain_merged", w)
	e.open(t, "y", 1)
	e.waitEvent(t, "merge_conflict", y2)
	e.waitIdle(t, 12)
	e.exactlyOnce(t, 12)
	if got := line2(t, p); got != "wv" {
		t.Errorf("line 2 = %q, want w's wv", got)
	}
	dead := p.messages(".decree/inbox/dead")
	if len(dead) != 1 || dead[0] != "y-retry.md" {
		t.Fatalf("dead = %v, want the requeued chain's first message", dead)
	}
	note := p.read(".decree/inbox/dead/y-retry.md.dead.txt")
	contains(t, "dead note", note, "MergeConflict")
	contains(t, "dead note", note, "shared.txt")
	if m := e.mergeOf(t, y2+"-1"); m == nil || m["result"] != "dead" {
		t.Errorf("merge of %s-1 = %v, want dead", y2, m)
	}
	if p.exists("out/y.txt") {
		t.Error("a chain that never merged left files in the project tree")
	}
	e.mergeOrderTree(t, initialTree)
	// status lists both conflicts: the requeue and the dead letter.
	r := p.ctl("", "status")
	mustCode(t, r, 0)
	contains(t, "status", r.stdout, "conflict    chain "+y+": shared.txt")
	contains(t, "status", r.stdout, "requeued as chain "+y2)
	contains(t, "status", r.stdout, "conflict    chain "+y2+": shared.txt")
	contains(t, "status", r.stdout, "its first message was dead-lettered")
	// Requeued once only: no third run of y.
	if n := strings.Count(readFile(t, e.ledger), " start y"); n != 6 {
		t.Errorf("chain y's messages started %d times, want 6 (two runs of three)", n)
	}
}

// TestParallelBeforeMergeGate: a failing beforeMerge gate is a conflict
// that is not requeued.
func TestParallelBeforeMergeGate(t *testing.T) {
	t.Parallel()
	e := newLanesWith(t, 2, 1, "hooks:\n  beforeMerge: gate\n", map[string]string{
		"gate": `if [ -e out/g-2.txt ]; then echo "gate says no" >&2; exit 3; fi`})
	p := e.p
	p.write(".decree/inbox/g.md", "file=g\n")
	testtool.WaitFor(t, 60*time.Second, "the chain to start", func() bool { return e.started(t, "g", 0) != "" })
	g := chainOf(e.started(t, "g", 0))
	e.waitEvent(t, "merge_conflict", g)
	e.waitIdle(t, 3)
	e.exactlyOnce(t, 3)
	if dead := p.messages(".decree/inbox/dead"); len(dead) != 1 || dead[0] != "g.md" {
		t.Fatalf("dead = %v, want g.md", dead)
	}
	contains(t, "dead note", p.read(".decree/inbox/dead/g.md.dead.txt"), "beforeMerge")
	if p.exists("out/g.txt") {
		t.Error("a gated chain's change reached the project tree")
	}
	if n := len(e.ledgerRuns(t)); n != 3 {
		t.Errorf("%d messages ran, want 3 (no requeue after a gate)", n)
	}
}

// TestParallelWorkerKilledMidChain: the worker holding a lane is killed
// with SIGKILL in the middle of the chain's second message; the chain
// goes on on another worker from its last finished message, and no
// message ends twice.
func TestParallelWorkerKilledMidChain(t *testing.T) {
	t.Parallel()
	testtool.Require(t, "bash")
	p := newProject(t, binary, baseConfig+"parallel: 2\n")
	ledger := filepath.Join(t.TempDir(), "ledger.txt")
	if err := os.WriteFile(ledger, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	p.routine("develop", "", strings.ReplaceAll(laneRoutine, "$LEDGER", ledger))
	p.write("shared.txt", "line one\nline two\nline three\n")
	e := &lanesEnv{p: p, ledger: ledger}
	e.ctrl = startController(t, p, "--lease-ttl", "2s")
	workers := map[string]*testtool.Proc{}
	for _, id := range []string{"r1", "r2"} {
		workers[id] = e.startWorker(t, id)
	}
	e.waitWorkers(t, 2)
	p.write(".decree/inbox/k.md", "file=k gate=k gateseq=1\n")
	testtool.WaitFor(t, 60*time.Second, "the second message to start", func() bool { return e.started(t, "k", 1) != "" })
	k := chainOf(e.started(t, "k", 1))
	holder := e.laneWorker(t, k)
	workers[holder].Signal(syscall.SIGKILL)
	<-workers[holder].Done()
	e.open(t, "k", 0)
	e.waitIdle(t, 3)
	runs, ends := e.ledgerRuns(t), e.ends(t)
	for s := 0; s < 3; s++ {
		id := fmt.Sprintf("%s-%d", k, s)
		wantStarts := 1
		if s == 1 {
			wantStarts = 2 // the attempt lost with its worker, and its retry
		}
		if runs[id] != wantStarts || ends[id] != 1 {
			t.Errorf("%s started %d and ended %d times, want %d and 1:\n%s", id, runs[id], ends[id], wantStarts, readFile(t, ledger))
		}
	}
	rec := readJSON(t, p.path(".decree/runs/"+k+"-1/run.json"))
	att := rec["attempt_details"].([]any)
	if len(att) != 2 || !strings.Contains(fmt.Sprint(att[0].(map[string]any)["error"]), "worker lost") {
		t.Fatalf("attempts of %s-1 = %v, want a lost one then a success", k, att)
	}
	for _, id := range []string{k + "-1", k + "-2"} {
		rec := readJSON(t, p.path(".decree/runs/"+id+"/run.json"))
		a := rec["attempt_details"].([]any)
		if w := a[len(a)-1].(map[string]any)["worker_id"]; w == holder {
			t.Errorf("%s ran on the killed worker %s", id, holder)
		}
	}
	if got := p.read("out/k.txt"); got != ids(k) {
		t.Errorf("out/k.txt = %q, want %q", got, ids(k))
	}
	e.mergeOrderTree(t, initialTree)
}

// laneWorker is the worker lane chain runs on, from status.
func (e *lanesEnv) laneWorker(t *testing.T, chain string) string {
	t.Helper()
	var worker string
	testtool.WaitFor(t, 30*time.Second, "the lane's worker in status", func() bool {
		r := e.p.ctl("", "status", "-o", "json")
		var st struct {
			Lanes []struct {
				Chain    string `json:"chain"`
				WorkerID string `json:"workerId"`
			} `json:"lanes"`
		}
		if err := json.Unmarshal([]byte(r.stdout), &st); err != nil {
			return false
		}
		for _, l := range st.Lanes {
			if l.Chain == chain && l.WorkerID != "" {
				worker = l.WorkerID
				return true
			}
		}
		return false
	})
	return worker
}

// TestParallelControllerKilledMidMerge: the controller dies with SIGKILL
// at three points of a merge (journal written, half the paths written, all
// written but not recorded); after a restart the merge is wholly applied,
// recorded once, and no message ran twice.
func TestParallelControllerKilledMidMerge(t *testing.T) {
	for _, point := range []string{"merge-journaled", "merge-half-applied", "merge-applied"} {
		t.Run(point, func(t *testing.T) {
			t.Parallel()
			testtool.Require(t, "bash")
			p := newProject(t, binary, baseConfig+"parallel: 2\nhooks:\n  beforeMerge: hold\n")
			ledger := filepath.Join(t.TempDir(), "ledger.txt")
			if err := os.WriteFile(ledger, nil, 0o644); err != nil {
				t.Fatal(err)
			}
			p.routine("develop", "", strings.ReplaceAll(laneRoutine, "$LEDGER", ledger))
			// Merges wait until both chains ended, so that no attempt runs
			// when the controller dies.
			p.routine("hold", "", fmt.Sprintf(`for i in $(seq 1200); do [ -e %q ] && exit 0; sleep 0.05; done; exit 1`, ledger+".merge"))
			p.write("shared.txt", "line one\nline two\nline three\n")
			e := &lanesEnv{p: p, ledger: ledger}
			cmd := exec.Command(bin(t, "decree-controller"), "--project", p.dir)
			cmd.Dir = p.dir
			cmd.Env = append(os.Environ(), "DECREE_CONTROLLER=", "DECREE_FAULT="+point)
			ctrl := testtool.Start(t, "decree-controller", cmd)
			testtool.WaitFor(t, 20*time.Second, "the controller's socket", func() bool { return socketLive(p.path(".decree/decree.sock")) })
			e.startWorker(t, "r1")
			e.startWorker(t, "r2")
			e.waitWorkers(t, 2)
			p.write(".decree/inbox/a.md", "file=a\n")
			p.write(".decree/inbox/b.md", "file=b\n")
			// Filed, not only ended: a controller killed while it records
			// an attempt's end runs that attempt again.
			testtool.WaitFor(t, 60*time.Second, "both chains to be done", func() bool {
				return len(p.messages(".decree/inbox/done")) == 6
			})
			if err := os.WriteFile(ledger+".merge", nil, 0o644); err != nil {
				t.Fatal(err)
			}
			select {
			case <-ctrl.Done():
			case <-time.After(60 * time.Second):
				t.Fatalf("the controller did not die at %s", point)
			}
			journals, _ := filepath.Glob(p.path(".decree/lanes/*/merge.json"))
			if len(journals) != 1 {
				t.Fatalf("after the kill: merge journals %v, want one", journals)
			}
			startController(t, p)
			e.waitIdle(t, 6)
			e.exactlyOnce(t, 6)
			merges := strings.Split(strings.TrimSpace(p.read(".decree/lanes/merges.jsonl")), "\n")
			if len(merges) != 2 || !strings.Contains(merges[0], `"order":1`) || !strings.Contains(merges[1], `"order":2`) {
				t.Errorf("merges.jsonl = %v, want orders 1 and 2 once each", merges)
			}
			for _, name := range []string{"a", "b"} {
				c := ""
				for id := range e.ledgerRuns(t) {
					if e.started(t, name, 0) == id {
						c = chainOf(id)
					}
				}
				if got := p.read("out/" + name + ".txt"); got != ids(c) {
					t.Errorf("out/%s.txt = %q, want %q", name, got, ids(c))
				}
				for k := 0; k < 3; k++ {
					if got := p.read(fmt.Sprintf("out/%s-%d.txt", name, k)); got != fmt.Sprintf("%s-%d\n", c, k) {
						t.Errorf("out/%s-%d.txt = %q", name, k, got)
					}
					if m := e.mergeOf(t, fmt.Sprintf("%s-%d", c, k)); m == nil || m["result"] != "merged" {
						t.Errorf("merge of %s-%d = %v", c, k, m)
					}
				}
			}
			e.mergeOrderTree(t, initialTree)
		})
	}
}

// TestParallelRevertMergedMessage: a merged message is reverted in the
// project tree by its own paths; one whose path a later merge changed is
// refused, naming that merge.
func TestParallelRevertMergedMessage(t *testing.T) {
	t.Parallel()
	e := newLanes(t, 2, 1, "")
	p := e.p
	p.write(".decree/inbox/s.md", "file=s shared=sv\n")
	testtool.WaitFor(t, 60*time.Second, "chain s to start", func() bool { return e.started(t, "s", 0) != "" })
	s := chainOf(e.started(t, "s", 0))
	e.waitEvent(t, "chain_merged", s)
	p.write(".decree/inbox/u.md", "file=u shared=uv\n")
	testtool.WaitFor(t, 60*time.Second, "chain u to start", func() bool { return e.started(t, "u", 0) != "" })
	u := chainOf(e.started(t, "u", 0))
	e.waitEvent(t, "chain_merged", u)
	e.waitIdle(t, 6)
	// u-2 only appended to out/u.txt and wrote out/u-2.txt.
	mustCode(t, p.ctl("", "revert", u+"-2"), 0)
	if p.exists("out/u-2.txt") {
		t.Error("revert left out/u-2.txt")
	}
	if got := p.read("out/u.txt"); got != u+"-0\n"+u+"-1\n" {
		t.Errorf("out/u.txt after revert = %q", got)
	}
	if got := line2(t, p); got != "uv" {
		t.Errorf("revert of u-2 touched shared.txt: line 2 = %q", got)
	}
	// s-0 set line 2 of shared.txt, which u's merge changed since.
	r := p.ctl("", "revert", s+"-0")
	if r.code == 0 {
		t.Fatalf("revert of %s-0 succeeded over a later merge:\n%s", s, r)
	}
	contains(t, "revert refusal", r.stderr, "merge 2 (chain "+u+")")
	if got := line2(t, p); got != "uv" {
		t.Errorf("a refused revert changed shared.txt: line 2 = %q", got)
	}
}

// TestParallelDisjointLinesMerge: two chains running side by side change
// lines 1 and 3 of one file; both merge, line by line (changes to lines
// next to each other conflict, as with git merge-file).
func TestParallelDisjointLinesMerge(t *testing.T) {
	t.Parallel()
	e := newLanes(t, 2, 2, "")
	p := e.p
	p.write(".decree/inbox/x.md", "file=x bottom=xv gate=x\n")
	p.write(".decree/inbox/y.md", "file=y top=yv gate=y\n")
	testtool.WaitFor(t, 60*time.Second, "both chains to start", func() bool {
		return e.started(t, "x", 0) != "" && e.started(t, "y", 0) != ""
	})
	x, y := chainOf(e.started(t, "x", 0)), chainOf(e.started(t, "y", 0))
	e.open(t, "x", 0)
	e.waitEvent(t, "chain_merged", x)
	e.open(t, "y", 0)
	e.waitEvent(t, "chain_merged", y)
	e.waitIdle(t, 6)
	e.exactlyOnce(t, 6)
	if got := p.read("shared.txt"); got != "yv\nline two\nxv\n" {
		t.Errorf("shared.txt = %q, want both chains' lines", got)
	}
	if e.event("merge_conflict", y) {
		t.Error("disjoint edits conflicted")
	}
}

// TestParallelWatchMessageEndsWithMerge: WatchMessage of a message in a
// lane carries the lane on its events and ends with its chain's merge.
func TestParallelWatchMessageEndsWithMerge(t *testing.T) {
	t.Parallel()
	e := newLanes(t, 2, 1, "")
	p := e.p
	p.write(".decree/inbox/x.md", "file=x gate=x\n")
	testtool.WaitFor(t, 60*time.Second, "the chain to start", func() bool { return e.started(t, "x", 0) != "" })
	id := e.started(t, "x", 0)
	conn, err := grpc.NewClient("unix://"+p.path(".decree/decree.sock"), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	st, err := decreev1.NewControllerServiceClient(conn).WatchMessage(ctx, &decreev1.WatchMessageRequest{MessageId: id})
	if err != nil {
		t.Fatal(err)
	}
	e.open(t, "x", 0)
	var kinds []string
	var outcome *decreev1.MessageOutcome
	for {
		r, err := st.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("WatchMessage: %v (so far %v)", err, kinds)
		}
		if ev := r.GetEvent(); ev != nil {
			kinds = append(kinds, strings.TrimPrefix(ev.GetKind().String(), "EVENT_KIND_"))
			if ev.GetLane() != chainOf(id) {
				t.Errorf("event %s has lane %q, want %s", ev.GetKind(), ev.GetLane(), chainOf(id))
			}
		}
		if o := r.GetOutcome(); o != nil {
			outcome = o
		}
	}
	got := strings.Join(kinds, " ")
	if !strings.HasSuffix(got, "MESSAGE_DONE CHAIN_MERGED") || outcome == nil {
		t.Errorf("watch = %s, outcome %v; want it to end with MESSAGE_DONE CHAIN_MERGED and an outcome", got, outcome)
	}
}

// TestParallelControllerKilledMidChain: the controller dies with SIGKILL
// while two lanes each run their second message. After a restart both
// lanes resume from their last finished message: the interrupted
// attempts run again (their first try never ends), nothing else runs
// twice, and both chains merge.
func TestParallelControllerKilledMidChain(t *testing.T) {
	t.Parallel()
	e := newLanes(t, 2, 2, "")
	p := e.p
	p.write(".decree/inbox/a.md", "file=a gate=a gateseq=1\n")
	p.write(".decree/inbox/b.md", "file=b gate=b gateseq=1\n")
	testtool.WaitFor(t, 60*time.Second, "both second messages to start", func() bool {
		return e.started(t, "a", 1) != "" && e.started(t, "b", 1) != ""
	})
	a, b := chainOf(e.started(t, "a", 1)), chainOf(e.started(t, "b", 1))
	e.ctrl.Signal(syscall.SIGKILL)
	<-e.ctrl.Done()
	e.ctrl = startController(t, p)
	// The attempts the dead controller gave out are fenced (their
	// routines killed) before they run again: only then the gates open.
	testtool.WaitFor(t, 90*time.Second, "both second messages to run again", func() bool {
		r := e.ledgerRuns(t)
		return r[a+"-1"] == 2 && r[b+"-1"] == 2
	})
	e.open(t, "a", 0)
	e.open(t, "b", 0)
	e.waitIdle(t, 6)
	runs, ends := e.ledgerRuns(t), e.ends(t)
	for _, c := range []string{a, b} {
		for s := 0; s < 3; s++ {
			id := fmt.Sprintf("%s-%d", c, s)
			starts := 1
			if s == 1 {
				starts = 2
			}
			if runs[id] != starts || ends[id] != 1 {
				t.Errorf("%s started %d and ended %d times, want %d and 1:\n%s", id, runs[id], ends[id], starts, readFile(t, e.ledger))
			}
		}
		if m := e.mergeOf(t, c+"-2"); m == nil || m["result"] != "merged" {
			t.Errorf("merge of %s = %v", c, m)
		}
	}
	e.mergeOrderTree(t, initialTree)
}

// TestParallelControllerKilledWhileCollecting: the controller dies with
// SIGKILL just after a lane's worker's follow-up entered the shared outbox
// (DECREE_FAULT=lane-delivered). After a restart that follow-up belongs
// to the interrupted attempt alone: it is discarded with it (the attempt
// runs again and queues its own), no other chain takes it, and every
// chain ends with exactly its three messages.
func TestParallelControllerKilledWhileCollecting(t *testing.T) {
	t.Parallel()
	testtool.Require(t, "bash")
	p := newProject(t, binary, baseConfig+"parallel: 2\n")
	ledger := filepath.Join(t.TempDir(), "ledger.txt")
	if err := os.WriteFile(ledger, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	p.routine("develop", "", strings.ReplaceAll(laneRoutine, "$LEDGER", ledger))
	p.write("shared.txt", initialTree["shared.txt"])
	e := &lanesEnv{p: p, ledger: ledger}
	cmd := exec.Command(bin(t, "decree-controller"), "--project", p.dir)
	cmd.Dir = p.dir
	cmd.Env = append(os.Environ(), "DECREE_CONTROLLER=", "DECREE_FAULT=lane-delivered")
	ctrl := testtool.Start(t, "decree-controller", cmd)
	testtool.WaitFor(t, 20*time.Second, "the controller's socket", func() bool { return socketLive(p.path(".decree/decree.sock")) })
	e.startWorker(t, "r1")
	e.startWorker(t, "r2")
	e.waitWorkers(t, 2)
	p.write(".decree/inbox/a.md", "file=a\n")
	select {
	case <-ctrl.Done():
	case <-time.After(60 * time.Second):
		t.Fatal("the controller did not die in the collection")
	}
	if !p.exists(".decree/lanes/collecting") || len(p.messages(".decree/outbox")) != 1 {
		t.Fatalf("after the kill: marker %v, outbox %v; want the marker and one follow-up", p.exists(".decree/lanes/collecting"), p.messages(".decree/outbox"))
	}
	crashed := strings.TrimSpace(p.read(".decree/lanes/collecting"))
	e.ctrl = startController(t, p)
	p.write(".decree/inbox/b.md", "file=b\n")
	e.waitIdle(t, 6)
	if p.exists(".decree/lanes/collecting") {
		t.Error("the collection marker outlived the restart")
	}
	done := p.runs()
	perChain := map[string]int{}
	for _, id := range done {
		perChain[chainOf(id)]++
	}
	if len(done) != 6 || len(perChain) != 2 || len(p.messages(".decree/inbox/done")) != 6 {
		t.Fatalf("runs = %v, done = %v, want two chains of three", done, p.messages(".decree/inbox/done"))
	}
	for c, n := range perChain {
		if n != 3 {
			t.Errorf("chain %s has %d messages done, want 3: %v", c, n, done)
		}
	}
	if got := p.list(".decree/runs/" + crashed + "/discarded-followups/try-001"); len(got) != 1 {
		t.Errorf("the interrupted attempt's follow-up: discarded %v, want one file", got)
	}
	runs, ends := e.ledgerRuns(t), e.ends(t)
	for id, n := range runs {
		want := 1
		if id == crashed {
			want = 2 // its attempt was under way when the controller died
		}
		if n != want || ends[id] != want {
			t.Errorf("%s started %d and ended %d times, want %d", id, n, ends[id], want)
		}
	}
	e.mergeOrderTree(t, initialTree)
}
