package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/decreehq/decree/internal/testtool"
	decreev1 "github.com/decreehq/decree/proto/decree/v1"
	"google.golang.org/protobuf/encoding/protojson"
)

// Parallel chains seen from the user's side (issue #26): decreectl process
// with no controller running (its embedded controller starts `parallel`
// replica workers of its own), decreectl status -o json while lanes run,
// and a message that opts out with `parallel: false`.

// TestParallelEmbeddedProcess: with no controller running, decreectl
// process on a project with parallel: 3 runs three chains of two messages
// side by side on the embedded lane workers and merges them all before it
// exits: every message once, the tree has every chain's files, and no lane
// is left in .decree/lanes/.
func TestParallelEmbeddedProcess(t *testing.T) {
	t.Parallel()
	testtool.Require(t, "bash")
	p := newProject(t, binary, baseConfig+"parallel: 3\n")
	ledger := filepath.Join(t.TempDir(), "ledger.txt")
	if err := os.WriteFile(ledger, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	// Chains of two (seq 0 queues seq 1), each message a second long so
	// that the three chains are seen side by side in the ledger.
	body := strings.NewReplacer(`"$seq" -lt 2`, `"$seq" -lt 1`, "${LANE_SLEEP:-0.2}", "1", "$LEDGER", ledger).Replace(laneRoutine)
	if !strings.Contains(body, `"$seq" -lt 1`) || !strings.Contains(body, "sleep \"1\"") {
		t.Fatal("laneRoutine changed: the chain length or sleep of this test was not set")
	}
	p.routine("develop", "", body)
	chains := []string{"a", "b", "c"}
	for _, n := range chains {
		p.write(".decree/inbox/"+n+".md", "file="+n+"\n")
	}
	if socketLive(p.path(".decree/decree.sock")) {
		t.Fatal("a controller serves the project already; the test needs none")
	}
	r := p.ctl("", "process")
	mustCode(t, r, 0)

	e := &lanesEnv{p: p, ledger: ledger}
	e.exactlyOnce(t, 6)
	if got := p.messages(".decree/inbox/done"); len(got) != 6 {
		t.Errorf("done = %v, want 6 messages", got)
	}
	if got := p.messages(".decree/inbox/dead"); len(got) != 0 {
		t.Errorf("dead = %v", got)
	}
	if got := p.messages(".decree/inbox"); len(got) != 0 {
		t.Errorf("inbox still holds %v after process", got)
	}
	if !overlapped(t, ledger) {
		t.Errorf("no two chains ran at the same time:\n%s", readFile(t, ledger))
	}
	// The merged tree: each chain's two messages, in its own file.
	for _, n := range chains {
		got := strings.Fields(p.read("out/" + n + ".txt"))
		if len(got) != 2 || chainOf(got[0]) != chainOf(got[1]) {
			t.Errorf("out/%s.txt = %v, want the chain's two messages", n, got)
		}
		for _, id := range got {
			if rec := readJSON(t, p.path(".decree/runs/"+id+"/run.json")); rec["lane"] != chainOf(id) {
				t.Errorf("%s: run.json lane = %v, want %s", id, rec["lane"], chainOf(id))
			}
			if m := e.mergeOf(t, id); m == nil || m["result"] != "merged" {
				t.Errorf("%s: run.json merge = %v, want merged", id, m)
			}
		}
	}
	// Every lane was merged and removed: only the merge log is left.
	ents, err := os.ReadDir(p.path(".decree/lanes"))
	if err != nil {
		t.Fatal(err)
	}
	var left []string
	for _, de := range ents {
		if de.IsDir() || de.Name() != "merges.jsonl" && de.Name() != "merge-order" {
			left = append(left, de.Name())
		}
	}
	if len(left) != 0 {
		t.Errorf(".decree/lanes holds %v after process, want only merges.jsonl and merge-order", left)
	}
	if got := strings.TrimSpace(p.read(".decree/lanes/merge-order")); got != "3" {
		t.Errorf("merge-order = %q, want 3", got)
	}
	if n := len(strings.Split(strings.TrimSpace(p.read(".decree/lanes/merges.jsonl")), "\n")); n != 3 {
		t.Errorf("merges.jsonl has %d lines, want 3", n)
	}
}

// statusJSON runs decreectl status -o json.
func statusJSON(t *testing.T, p *project) *decreev1.GetStatusResponse {
	t.Helper()
	r := p.ctl("", "status", "-o", "json")
	mustCode(t, r, 0)
	var st decreev1.GetStatusResponse
	if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal([]byte(r.stdout), &st); err != nil {
		t.Fatalf("status -o json is not a status: %v\n%s", err, r.stdout)
	}
	return &st
}

// twoGatedLanes starts chain a held at its first message and chain b held
// at its second, on two replica workers, and returns the two messages
// running (per the ledger).
func twoGatedLanes(t *testing.T) (e *lanesEnv, a, b string) {
	e = newLanes(t, 2, 2, "")
	e.p.write(".decree/inbox/a.md", "file=a gate=a\n")
	e.p.write(".decree/inbox/b.md", "file=b gate=b gateseq=1\n")
	testtool.WaitFor(t, 60*time.Second, "a's first and b's second message to start", func() bool {
		return e.started(t, "a", 0) != "" && e.started(t, "b", 1) != ""
	})
	return e, e.started(t, "a", 0), e.started(t, "b", 1)
}

// TestParallelStatusJSON: decreectl status -o json against a running
// decree-controller with two replica workers shows both lanes while their
// chains run, each with the worker it runs on and the message running
// there, whether that is the chain's first message (a) or a later one (b);
// once both chains are merged, no lane and a merge count of 2.
func TestParallelStatusJSON(t *testing.T) {
	t.Parallel()
	e, a, b := twoGatedLanes(t)
	p := e.p
	raw := p.ctl("", "status", "-o", "json").stdout
	for _, key := range []string{`"lanes"`, `"messageId"`, `"workerId"`} {
		if !strings.Contains(raw, key) {
			t.Errorf("status -o json has no %s:\n%s", key, raw)
		}
	}
	st := statusJSON(t, p)
	got := map[string]*decreev1.Lane{}
	for _, l := range st.GetLanes() {
		got[l.GetMessageId()] = l
	}
	if len(st.GetLanes()) != 2 || got[a] == nil || got[b] == nil {
		t.Fatalf("lanes = %v, want two running %s and %s", st.GetLanes(), a, b)
	}
	workers := map[string]bool{}
	for _, id := range []string{a, b} {
		l := got[id]
		if l.GetChain() != chainOf(id) {
			t.Errorf("lane of %s: chain %q, want %q", id, l.GetChain(), chainOf(id))
		}
		if w := l.GetWorkerId(); w != "r1" && w != "r2" {
			t.Errorf("lane of %s (seq %s): worker_id %q while the routine runs on a worker, want r1 or r2", id, id[len(chainOf(id))+1:], w)
		}
		workers[l.GetWorkerId()] = true
		if l.GetState() != decreev1.LaneState_LANE_STATE_RUNNING || l.GetAttempt() != 1 {
			t.Errorf("lane of %s: state %v attempt %d, want running, attempt 1", id, l.GetState(), l.GetAttempt())
		}
	}
	if len(workers) != 2 {
		t.Errorf("the lanes' workers %v, want one worker each", workers)
	}
	if st.GetMerges() != 0 {
		t.Errorf("merges = %d before any chain finished", st.GetMerges())
	}
	e.open(t, "a", 0)
	e.open(t, "b", 0)
	e.waitIdle(t, 6)
	st = statusJSON(t, p)
	if len(st.GetLanes()) != 0 || st.GetMerges() != 2 {
		t.Errorf("after both chains: lanes %v, merges %d; want none and 2", st.GetLanes(), st.GetMerges())
	}
	e.exactlyOnce(t, 6)
}

// TestParallelStatusLanesNotInterrupted: while two lanes run, status
// counts neither lane's running message as queued, and lists neither as
// interrupted (an interrupted message is one a stopped controller left
// half done; these run now).
func TestParallelStatusLanesNotInterrupted(t *testing.T) {
	t.Parallel()
	e, a, b := twoGatedLanes(t)
	st := statusJSON(t, e.p)
	for _, m := range st.GetInterrupted() {
		if m.GetId() == a || m.GetId() == b {
			t.Errorf("status lists %s, running in lane %s, as interrupted (state %v)", m.GetId(), m.GetChain(), m.GetState())
		}
	}
	if st.GetQueued() != 0 {
		t.Errorf("status: %d queued, want 0: only %s and %s are in the inbox, both running", st.GetQueued(), a, b)
	}
	e.open(t, "a", 0)
	e.open(t, "b", 0)
	e.waitIdle(t, 6)
	e.exactlyOnce(t, 6)
}

// TestParallelFalseRunsAlone: a message whose frontmatter says
// parallel: false waits for the lanes open before it to be merged, runs
// on the project tree (no lane) with nothing beside it, and lanes open
// again after it.
func TestParallelFalseRunsAlone(t *testing.T) {
	t.Parallel()
	e := newLanesWith(t, 2, 2, "", map[string]string{"solo": `
echo "$message_id $(date +%s.%N) start solo" >> "$LEDGER"
sleep 0.5
echo "$message_id" > solo.txt
echo "$message_id $(date +%s.%N) end solo" >> "$LEDGER"
`})
	p := e.p
	// The solo routine's ledger is the lanes' ledger.
	p.write(".decree/routines/solo.sh", strings.ReplaceAll(p.read(".decree/routines/solo.sh"), "$LEDGER", e.ledger))
	p.write(".decree/inbox/a.md", "file=a gate=a\n")
	p.write(".decree/inbox/b.md", "file=b gate=b\n")
	testtool.WaitFor(t, 60*time.Second, "both chains to start", func() bool {
		return e.started(t, "a", 0) != "" && e.started(t, "b", 0) != ""
	})
	p.write(".decree/inbox/s.md", "---\nparallel: false\nroutine: solo\n---\nfile=s\n")
	// s is queued behind two open lanes: it may not start while they run.
	testtool.WaitFor(t, 30*time.Second, "the controller to see s queued", func() bool {
		return statusJSON(t, p).GetQueued() >= 1
	})
	if e.started(t, "solo", 0) != "" {
		t.Fatalf("the parallel: false message started beside open lanes:\n%s", readFile(t, e.ledger))
	}
	e.open(t, "a", 0)
	e.open(t, "b", 0)
	testtool.WaitFor(t, 60*time.Second, "the solo message to start", func() bool { return e.started(t, "solo", 0) != "" })
	// A chain queued while s runs opens its lane only after s.
	p.write(".decree/inbox/c.md", "file=c\n")
	e.waitIdle(t, 10)
	e.exactlyOnce(t, 10)

	s := e.started(t, "solo", 0)
	spans := ledgerSpans(t, e.ledger)
	for id, sp := range spans {
		if id != s && sp.start < spans[s].end && spans[s].start < sp.end {
			t.Errorf("%s ran beside the parallel: false message %s:\n%s", id, s, readFile(t, e.ledger))
		}
	}
	if rec := readJSON(t, p.path(".decree/runs/"+s+"/run.json")); rec["lane"] != nil {
		t.Errorf("%s: run.json lane = %v, want none (it runs on the project tree)", s, rec["lane"])
	}
	// It started after the lanes opened before it were merged.
	merged := eventTimes(t, p, "chain_merged")
	started := eventTimes(t, p, "message_started")
	for _, n := range []string{"a", "b"} {
		chain := chainOf(e.started(t, n, 0))
		if merged[chain].IsZero() || !started[chainOf(s)].After(merged[chain]) {
			t.Errorf("%s started at %v, chain %s (%s) merged at %v: want it after the merge", s, started[chainOf(s)], n, chain, merged[chain])
		}
	}
	c := e.started(t, "c", 0)
	if c == "" || spans[c].start < spans[s].end {
		t.Errorf("chain c (%s) started before the parallel: false message ended:\n%s", c, readFile(t, e.ledger))
	} else if rec := readJSON(t, p.path(".decree/runs/"+c+"/run.json")); rec["lane"] != chainOf(c) {
		t.Errorf("%s: run.json lane = %v, want %s: lanes open again after the barrier", c, rec["lane"], chainOf(c))
	}
	if got := strings.TrimSpace(p.read("solo.txt")); got != s {
		t.Errorf("solo.txt = %q, want %s", got, s)
	}
	for _, n := range []string{"a", "b", "c"} {
		if got := strings.Fields(p.read("out/" + n + ".txt")); len(got) != 3 {
			t.Errorf("out/%s.txt = %v, want the chain's three messages", n, got)
		}
	}
}

type ledgerSpan struct{ start, end float64 }

// ledgerSpans reads each message's start and end from the ledger.
func ledgerSpans(t *testing.T, ledger string) map[string]*ledgerSpan {
	out := map[string]*ledgerSpan{}
	for _, line := range strings.Split(strings.TrimSpace(readFile(t, ledger)), "\n") {
		f := strings.Fields(line)
		if len(f) < 3 {
			continue
		}
		v, err := strconv.ParseFloat(f[1], 64)
		if err != nil {
			t.Fatalf("ledger line %q: %v", line, err)
		}
		if out[f[0]] == nil {
			out[f[0]] = &ledgerSpan{}
		}
		if f[2] == "start" {
			out[f[0]].start = v
		} else {
			out[f[0]].end = v
		}
	}
	return out
}

// eventTimes maps chain to the time of its first event of kind.
func eventTimes(t *testing.T, p *project, kind string) map[string]time.Time {
	out := map[string]time.Time{}
	for _, line := range strings.Split(p.read(".decree/events.jsonl"), "\n") {
		var ev struct {
			Time  time.Time `json:"time"`
			Kind  string    `json:"kind"`
			Chain string    `json:"chain"`
		}
		if json.Unmarshal([]byte(line), &ev) != nil || ev.Kind != kind {
			continue
		}
		if _, ok := out[ev.Chain]; !ok {
			out[ev.Chain] = ev.Time
		}
	}
	return out
}

// TestParallelLaneHoldsItsWorkerFromTheStart: a lane's worker is its own
// from the chain's first assignment. With one worker r1, chains a and b
// both wait to start; the one r1 took (X) finishes its first message, and
// its second must run next on r1 while the other chain (Y) waits for a
// second worker, r2, which then takes it. A lane that reserved its worker
// only once its first result came back lets Y's first message slip onto
// r1 in between; X's next message then waits on r1 (reserved, alive, busy)
// for as long as Y's message runs, with r2 idle.
func TestParallelLaneHoldsItsWorkerFromTheStart(t *testing.T) {
	t.Parallel()
	e := newLanes(t, 2, 1, "")
	p := e.p
	p.write(".decree/inbox/a.md", "file=a gate=a\n")
	p.write(".decree/inbox/b.md", "file=b gate=b\n")
	var x, y string
	testtool.WaitFor(t, 60*time.Second, "a chain to start on r1", func() bool {
		switch {
		case e.started(t, "a", 0) != "":
			x, y = "a", "b"
		case e.started(t, "b", 0) != "":
			x, y = "b", "a"
		}
		return x != ""
	})
	e.open(t, x, 0)
	testtool.WaitFor(t, 60*time.Second, x+"'s first message to end", func() bool {
		return e.ends(t)[e.started(t, x, 0)] == 1
	})
	e.startWorker(t, "r2")
	testtool.WaitFor(t, 30*time.Second, x+"'s second message to start while "+y+" waits at its gate", func() bool {
		return e.started(t, x, 1) != ""
	})
	testtool.WaitFor(t, 30*time.Second, y+"'s first message to start on r2", func() bool {
		return e.started(t, y, 0) != ""
	})
	e.open(t, y, 0)
	e.waitIdle(t, 6)
	e.exactlyOnce(t, 6)
	for _, n := range []string{"a", "b"} {
		id := e.started(t, n, 0)
		chain := chainOf(id)
		workers := map[string]bool{}
		for seq := 0; seq < 3; seq++ {
			rec := readJSON(t, p.path(".decree/runs/"+chain+"-"+strconv.Itoa(seq)+"/run.json"))
			for _, a := range rec["attempt_details"].([]any) {
				workers[a.(map[string]any)["worker_id"].(string)] = true
			}
		}
		want := "r1"
		if n == y {
			want = "r2"
		}
		if len(workers) != 1 || !workers[want] {
			t.Errorf("chain %s (%s) ran on %v, want only %s", n, chain, workers, want)
		}
	}
}
