package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/decreehq/decree/internal/testtool"
)

// Parallel chains (issue #26), with a real controller and real replica
// workers in separate processes. Every routine appends "<message id>" to a
// ledger outside the project, so a message that ran twice, or not at all,
// shows there whatever the project tree says.

// laneRoutine: seq 0 and 1 queue the next message through the outbox;
// each message writes its own files (named after the chain's "file="
// word). Words in the message steer it: "shared=V" sets line 2 of
// shared.txt to V (conflict tests); "gate=G" waits until the file
// $LEDGER.G.<retry> exists (retry is 1 in a chain run again after a merge
// conflict), so a test decides when the message goes on.
const laneRoutine = `
line=$(grep -m1 -o 'file=.*' "$message_file")
name=$(echo "$line" | grep -o 'file=[a-z0-9-]*' | cut -d= -f2)
echo "$message_id $(date +%s.%N) start $name" >> "$LEDGER"
retry=0
if grep -q '^merge_retry_of:' "$message_file"; then retry=1; fi
mkdir -p out
echo "$message_id" >> "out/$name.txt"
echo "$message_id" > "out/$name-$seq.txt"
gateseq=$(echo "$line" | grep -o 'gateseq=[0-9]*' | cut -d= -f2 || true)
if g=$(echo "$line" | grep -o 'gate=[a-z0-9-]*') && [ "$seq" = "${gateseq:-0}" ]; then
  gate="$LEDGER.${g#gate=}.$retry"
  for i in $(seq 1200); do [ -e "$gate" ] && break; sleep 0.05; done
fi
if [ "$seq" = 0 ] && echo "$line" | grep -q 'big=yes'; then
  head -c 6000000 /dev/urandom > "out/$name-big.bin"
fi
if v=$(echo "$line" | grep -o 'top=[a-z0-9-]*'); then
  sed -i "1s/.*/${v#top=}/" shared.txt
fi
if v=$(echo "$line" | grep -o 'bottom=[a-z0-9-]*'); then
  sed -i "3s/.*/${v#bottom=}/" shared.txt
fi
if v=$(echo "$line" | grep -o 'shared=[a-z0-9-]*'); then
  sed -i "2s/.*/${v#shared=}/" shared.txt
fi
sleep "${LANE_SLEEP:-0.2}"
if [ "$seq" -lt 2 ]; then
  printf '%s\n' "$line" > .decree/outbox/next.md
fi
echo "$message_id $(date +%s.%N) end $name" >> "$LEDGER"
`

type lanesEnv struct {
	p      *project
	ledger string
	ctrl   *testtool.Proc
}

// newLanes starts a controller with parallel: n and w replica workers.
func newLanes(t *testing.T, n, w int, extraCfg string) *lanesEnv {
	t.Helper()
	return newLanesWith(t, n, w, extraCfg, nil)
}

// newLanesWith is newLanes with more routines (name -> body).
func newLanesWith(t *testing.T, n, w int, extraCfg string, routines map[string]string) *lanesEnv {
	t.Helper()
	testtool.Require(t, "bash")
	p := newProject(t, binary, fmt.Sprintf("%sparallel: %d\n%s", baseConfig, n, extraCfg))
	ledger := filepath.Join(t.TempDir(), "ledger.txt")
	if err := os.WriteFile(ledger, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	p.routine("develop", "", strings.ReplaceAll(laneRoutine, "$LEDGER", ledger))
	for name, body := range routines {
		p.routine(name, "", body)
	}
	p.write("shared.txt", initialTree["shared.txt"])
	e := &lanesEnv{p: p, ledger: ledger}
	e.ctrl = startController(t, p)
	for k := 1; k <= w; k++ {
		e.startWorker(t, fmt.Sprintf("r%d", k))
	}
	e.waitWorkers(t, w)
	return e
}

// waitWorkers waits until n workers are connected: until then the first
// chain would run on the project tree, one at a time.
func (e *lanesEnv) waitWorkers(t *testing.T, n int) {
	t.Helper()
	testtool.WaitFor(t, 30*time.Second, fmt.Sprintf("%d workers to connect", n), func() bool {
		r := e.p.ctl("", "status", "-o", "json")
		var st struct {
			WorkersConnected int `json:"workersConnected"`
		}
		return json.Unmarshal([]byte(r.stdout), &st) == nil && st.WorkersConnected >= n
	})
}

func (e *lanesEnv) startWorker(t *testing.T, id string) *testtool.Proc {
	ws := filepath.Join(t.TempDir(), "ws-"+id)
	if err := os.MkdirAll(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	return start(t, ws, "decree-worker", "--controller", "unix://"+e.p.path(".decree/decree.sock"), "--workspace", ws, "--id", id)
}

// ledgerRuns counts the starts per message id.
func (e *lanesEnv) ledgerRuns(t *testing.T) map[string]int {
	data, err := os.ReadFile(e.ledger)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		f := strings.Fields(line)
		if len(f) >= 3 && f[2] == "start" {
			out[f[0]]++
		}
	}
	return out
}

// waitIdle waits until the inbox is empty and no lane is left.
func (e *lanesEnv) waitIdle(t *testing.T, done int) {
	t.Helper()
	testtool.WaitFor(t, 90*time.Second, fmt.Sprintf("%d messages done and every lane merged", done), func() bool {
		lanes, _ := os.ReadDir(e.p.path(".decree/lanes"))
		open := 0
		for _, l := range lanes {
			if l.IsDir() {
				open++
			}
		}
		if len(e.p.messages(".decree/inbox/done"))+len(e.p.messages(".decree/inbox/dead")) < done || open > 0 || len(e.p.messages(".decree/inbox")) > 0 {
			return false
		}
		// Every lane's merge event is out (it follows the lane's removal).
		evs := e.p.read(".decree/events.jsonl")
		return strings.Count(evs, `"kind":"lane_opened"`) == strings.Count(evs, `"kind":"chain_merged"`)+strings.Count(evs, `"kind":"merge_conflict"`)
	})
}

// TestParallelCleanRun: four independent chains of three messages on two
// replica workers with parallel: 2 run two at a time, each chain on one
// worker; every message runs once, the merged tree has every chain's
// files, and run.json records the lane and the merge.
func TestParallelCleanRun(t *testing.T) {
	t.Parallel()
	e := newLanes(t, 2, 2, "")
	p := e.p
	for _, n := range []string{"a", "b", "c", "d"} {
		p.write(".decree/inbox/"+n+".md", "file="+n+"\n")
	}
	e.waitIdle(t, 12)
	runs := e.ledgerRuns(t)
	if len(runs) != 12 {
		t.Fatalf("ledger has %d messages, want 12: %v\nevents:\n%s", len(runs), runs, p.read(".decree/events.jsonl"))
	}
	for id, n := range runs {
		if n != 1 {
			t.Errorf("message %s ran %d times", id, n)
		}
	}
	for _, n := range []string{"a", "b", "c", "d"} {
		got := strings.Fields(p.read("out/" + n + ".txt"))
		if len(got) != 3 {
			t.Errorf("out/%s.txt = %v, want the chain's three messages", n, got)
		}
	}
	if got := p.messages(".decree/inbox/dead"); len(got) != 0 {
		t.Errorf("dead = %v", got)
	}
	e.mergeOrderTree(t, initialTree)
	// Each message records its lane; the chain's merge is recorded too, in
	// a merge order without gaps or repeats.
	orders := map[float64]string{}
	workers := map[string]map[string]bool{}
	for _, id := range p.runs() {
		rec := readJSON(t, p.path(".decree/runs/"+id+"/run.json"))
		chain := strings.Split(id, "-")[0]
		if rec["lane"] != chain {
			t.Errorf("%s: run.json lane = %v, want %s", id, rec["lane"], chain)
		}
		m, _ := rec["merge"].(map[string]any)
		if m == nil || m["result"] != "merged" {
			t.Errorf("%s: run.json merge = %v, want merged", id, rec["merge"])
			continue
		}
		orders[m["order"].(float64)] = chain
		for _, a := range rec["attempt_details"].([]any) {
			w := a.(map[string]any)["worker_id"].(string)
			if workers[chain] == nil {
				workers[chain] = map[string]bool{}
			}
			workers[chain][w] = true
		}
	}
	if len(orders) != 4 {
		t.Errorf("merge orders %v, want 4 distinct", orders)
	}
	for chain, ws := range workers {
		if len(ws) != 1 {
			t.Errorf("chain %s ran on workers %v, want one", chain, ws)
		}
	}
	// Events of lane messages, and the lanes' own, name the lane.
	var finished, opened, merged int
	for _, line := range strings.Split(p.read(".decree/events.jsonl"), "\n") {
		switch {
		case strings.Contains(line, `"kind":"attempt_finished"`) && strings.Contains(line, `"lane":"`):
			finished++
		case strings.Contains(line, `"kind":"lane_opened"`):
			opened++
		case strings.Contains(line, `"kind":"chain_merged"`) && strings.Contains(line, `"lane":"`):
			merged++
		}
	}
	if finished != 12 || opened != 4 || merged != 4 {
		t.Errorf("events: %d attempt_finished with a lane (want 12), %d lane_opened (want 4), %d chain_merged (want 4)", finished, opened, merged)
	}
	// Lanes overlapped: some message started before another chain's ended.
	if !overlapped(t, e.ledger) {
		t.Errorf("no two chains ran at the same time:\n%s", readFile(t, e.ledger))
	}
}

// overlapped reports whether two messages of different chains ran at once.
func overlapped(t *testing.T, ledger string) bool {
	type span struct {
		chain      string
		start, end string
	}
	spans := map[string]*span{}
	for _, line := range strings.Split(strings.TrimSpace(readFile(t, ledger)), "\n") {
		f := strings.Fields(line)
		if len(f) < 3 {
			continue
		}
		s := spans[f[0]]
		if s == nil {
			s = &span{chain: strings.Split(f[0], "-")[0]}
			spans[f[0]] = s
		}
		if f[2] == "start" {
			s.start = f[1]
		} else {
			s.end = f[1]
		}
	}
	var all []*span
	for _, s := range spans {
		all = append(all, s)
	}
	sort.Slice(all, func(i, j int) bool { return all[i].start < all[j].start })
	for i := range all {
		for j := i + 1; j < len(all); j++ {
			if all[i].chain != all[j].chain && all[j].start < all[i].end {
				return true
			}
		}
	}
	return false
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// mergeOrderTree checks the project tree against an oracle: the initial
// tree with every merged chain's messages' changes.diff applied by
// `git apply`, chain after chain in the merge order of merges.jsonl.
// Chains whose merge conflicted contribute nothing.
func (e *lanesEnv) mergeOrderTree(t *testing.T, initial map[string]string) {
	t.Helper()
	testtool.Require(t, "git")
	dir := t.TempDir()
	for path, body := range initial {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, path)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, path), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var merges []struct {
		Order int    `json:"order"`
		Chain string `json:"chain"`
	}
	for _, line := range strings.Split(strings.TrimSpace(e.p.read(".decree/lanes/merges.jsonl")), "\n") {
		var m struct {
			Order int    `json:"order"`
			Chain string `json:"chain"`
		}
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("merges.jsonl: %v", err)
		}
		merges = append(merges, m)
	}
	sort.Slice(merges, func(i, j int) bool { return merges[i].Order < merges[j].Order })
	for _, m := range merges {
		for seq := 0; e.p.exists(fmt.Sprintf(".decree/runs/%s-%d/run.json", m.Chain, seq)); seq++ {
			diff := e.p.path(fmt.Sprintf(".decree/runs/%s-%d/changes.diff", m.Chain, seq))
			if fi, err := os.Stat(diff); err != nil || fi.Size() == 0 {
				continue
			}
			cmd := exec.Command("git", "apply", "--unsafe-paths", diff)
			cmd.Dir = dir
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("git apply of %s-%d (merge %d): %v\n%s", m.Chain, seq, m.Order, err, out)
			}
		}
	}
	want := map[string]string{}
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		b, err := os.ReadFile(path)
		want[filepath.ToSlash(rel)] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	e.p.sameTree(want)
}

// initialTree is the project tree every lanes test starts from.
var initialTree = map[string]string{"shared.txt": "line one\nline two\nline three\n"}
