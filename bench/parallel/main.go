// Command parallel-bench measures parallel chains (issue 26): C independent
// chains of L messages each, every message a routine that sleeps S and
// edits its chain's own file, processed by a separate decree-controller
// process with `parallel: W` and W separate decree-worker processes, each
// with a workspace of its own (replica workers), for each W asked.
//
// The reference is the ideal wall time, messages x S / min(W, C): what W
// machines would take if nothing but the routines cost time. The wall time
// runs from the first message taken (its lane_opened or message_started
// event) to the last chain merged into the project tree (or, with W = 1,
// the last message done), so the merges count; the time the controller
// took to notice the files dropped into the inbox (its 1 s poll) is
// printed apart as pickup.
// The worker counts are measured in interleaved rounds (ascending, then
// descending, ...) so that a drift of the machine's load does not favour
// one of them; the load average is printed beside every line.
//
// Merge overhead per chain, from events.jsonl: the time from the chain's
// last message_done to its chain_merged event (lanes only: with W = 1 the
// controller runs one chain at a time on the project tree, no merge).
//
// Then a conflict scenario: two chains of one message each change line 2 of
// one file, on 2 workers. The one that finishes second conflicts at its
// merge (merge_conflict), nothing of it is applied, it is requeued as a new
// chain whose first message says merge_retry_of, and that chain runs on the
// merged tree and merges. The program prints what happened and fails when
// anything else did.
//
//	parallel-bench -bin DIR [-workers 1,2,4,8] [-chains 8] [-len 3] [-sleep 2s] [-rounds 2]
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/decreehq/decree/bench/internal/benchproj"
	decreev1 "github.com/decreehq/decree/proto/decree/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

type params struct {
	bin           string
	chains, len   int
	sleep         time.Duration
	files         int
	conflictSleep time.Duration
}

func main() {
	var p params
	flag.StringVar(&p.bin, "bin", "", "directory holding the built decree-controller, decree-worker and decree-supervisor")
	workers := flag.String("workers", "1,2,4,8", "worker counts (each also the config's parallel), comma-separated")
	flag.IntVar(&p.chains, "chains", 8, "independent chains")
	flag.IntVar(&p.len, "len", 3, "messages per chain")
	flag.DurationVar(&p.sleep, "sleep", 2*time.Second, "what each routine sleeps")
	flag.IntVar(&p.files, "files", 200, "files in the project tree besides the chains' own")
	rounds := flag.Int("rounds", 2, "interleaved rounds over the worker counts")
	conflict := flag.Bool("conflict", true, "run the conflict scenario after the rounds")
	flag.Parse()
	p.conflictSleep = time.Second
	if p.bin == "" {
		fmt.Fprintln(os.Stderr, "parallel-bench: -bin is required")
		os.Exit(2)
	}
	var ws []int
	for _, s := range strings.Split(*workers, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 {
			fmt.Fprintf(os.Stderr, "parallel-bench: bad worker count %q\n", s)
			os.Exit(2)
		}
		ws = append(ws, n)
	}
	fmt.Printf("chains=%d messages_per_chain=%d routine_sleep=%s cpus=%d\n", p.chains, p.len, p.sleep, runtime.NumCPU())
	ratios := map[int][]float64{}
	for r := 0; r < *rounds; r++ {
		order := append([]int(nil), ws...)
		if r%2 == 1 {
			sort.Sort(sort.Reverse(sort.IntSlice(order)))
		}
		for _, w := range order {
			res, err := p.measure(w)
			if err != nil {
				fmt.Fprintf(os.Stderr, "parallel-bench: workers=%d: %v\n", w, err)
				os.Exit(1)
			}
			fmt.Printf("round=%d %s\n", r+1, res)
			ratios[w] = append(ratios[w], res.ratio())
		}
	}
	fmt.Println("summary (ratio = wall / ideal, per round):")
	for _, w := range ws {
		fmt.Printf("  workers=%d ratios=%s mean=%.3f\n", w, fmtList(ratios[w]), mean(ratios[w]))
	}
	if rs, ok := ratios[4]; ok {
		verdict := "met"
		if mean(rs) > 1.15 {
			verdict = "NOT met"
		}
		fmt.Printf("goal (issue 26): within 15%% of ideal at 4 workers: mean ratio %.3f, %s\n", mean(rs), verdict)
	}
	if *conflict {
		if err := p.conflictScenario(); err != nil {
			fmt.Fprintln(os.Stderr, "parallel-bench: conflict scenario:", err)
			os.Exit(1)
		}
	}
}

// routine is the benchmark's routine: it logs start and end of every
// message to LEDGER (outside the project), sleeps, appends its id to the
// chain's own file out/<name>.txt, sets line 2 of shared.txt when the
// message says shared=V, and queues the chain's next message through the
// outbox until seq reaches LEN-1. The message's body is one line of words:
// "file=NAME len=LEN sleep=S [shared=V]".
const routine = `#!/usr/bin/env bash
# Bench: sleep, edit the chain's own file, queue the chain's next message.
set -euo pipefail
message_file="${message_file:-}"
message_id="${message_id:-}"
seq="${seq:-}"
line=$(grep -m1 -o 'file=.*' "$message_file")
word() { echo "$line" | grep -o "$1=[a-z0-9.-]*" | cut -d= -f2 || true; }
name=$(word file)
echo "$message_id $(date +%s.%N) start" >> "@LEDGER@"
sleep "$(word sleep)"
mkdir -p out
echo "$message_id" >> "out/$name.txt"
if v=$(word shared) && [ -n "$v" ]; then
  sed -i "2s/.*/$v/" shared.txt
fi
if [ "$seq" -lt $(( $(word len) - 1 )) ]; then
  printf '%s\n' "$line" > .decree/outbox/next.md
fi
echo "$message_id $(date +%s.%N) end" >> "@LEDGER@"
`

// env is one measured set-up: a project, its controller and workers.
type env struct {
	dir, ledger string
	procs       []*exec.Cmd
	client      decreev1.ControllerServiceClient
	conn        *grpc.ClientConn
}

func (e *env) close() {
	for i := len(e.procs) - 1; i >= 0; i-- {
		_ = e.procs[i].Process.Kill()
		_ = e.procs[i].Wait()
	}
	if e.conn != nil {
		e.conn.Close()
	}
	_ = os.RemoveAll(e.dir)
	_ = os.RemoveAll(e.dir + "-ws")
	_ = os.Remove(e.ledger)
}

// start creates a project with parallel: w, starts the controller and w
// replica workers, and waits until every worker is connected.
func (p params) start(w int) (*env, error) {
	dir, err := benchproj.New("decree-parbench-", p.files, 100, "develop")
	if err != nil {
		return nil, err
	}
	e := &env{dir: dir, ledger: dir + "-ledger.txt"}
	cfgPath := filepath.Join(dir, ".decree", "config.yml")
	cfg, err := os.ReadFile(cfgPath)
	if err != nil {
		return e, err
	}
	if err := os.WriteFile(cfgPath, append(cfg, fmt.Sprintf("parallel: %d\n", w)...), 0o644); err != nil {
		return e, err
	}
	body := strings.ReplaceAll(routine, "@LEDGER@", e.ledger)
	if err := os.WriteFile(filepath.Join(dir, ".decree", "routines", "develop.sh"), []byte(body), 0o755); err != nil {
		return e, err
	}
	if err := os.WriteFile(filepath.Join(dir, "shared.txt"), []byte("line one\nline two\nline three\n"), 0o644); err != nil {
		return e, err
	}
	if err := os.WriteFile(e.ledger, nil, 0o644); err != nil {
		return e, err
	}
	benchproj.Settle()
	ctl := exec.Command(filepath.Join(p.bin, "decree-controller"), "--project", dir)
	ctl.Env = append(os.Environ(), "DECREE_CONTROLLER=")
	if err := ctl.Start(); err != nil {
		return e, err
	}
	e.procs = append(e.procs, ctl)
	sock := filepath.Join(dir, ".decree", "decree.sock")
	e.conn, err = grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return e, err
	}
	e.client = decreev1.NewControllerServiceClient(e.conn)
	if err := poll(60*time.Second, "the controller to serve", func() bool {
		_, err := e.client.GetStatus(context.Background(), &decreev1.GetStatusRequest{})
		return err == nil
	}); err != nil {
		return e, err
	}
	for k := 1; k <= w; k++ {
		ws := filepath.Join(dir+"-ws", fmt.Sprintf("w%d", k))
		if err := os.MkdirAll(ws, 0o755); err != nil {
			return e, err
		}
		wrk := exec.Command(filepath.Join(p.bin, "decree-worker"), "--controller", "unix://"+sock, "--workspace", ws, "--id", fmt.Sprintf("w%d", k))
		wrk.Env = ctl.Env
		if err := wrk.Start(); err != nil {
			return e, err
		}
		e.procs = append(e.procs, wrk)
	}
	err = poll(60*time.Second, fmt.Sprintf("%d workers to connect", w), func() bool {
		st, err := e.client.GetStatus(context.Background(), &decreev1.GetStatusRequest{})
		return err == nil && int(st.GetWorkersConnected()) >= w
	})
	return e, err
}

// result is one measured run.
type result struct {
	workers, chains, messages int
	wall, ideal, pickup       time.Duration
	maxConcurrent             int
	mergeOverhead             []time.Duration
	// gaps are the times from a message's routine ending to the next
	// message of its chain starting its routine (the per-message cost of
	// decree: collect, checkpoint, diff, sync, dispatch).
	gaps                  []time.Duration
	loadBefore, loadAfter string
}

func (r result) ratio() float64 { return r.wall.Seconds() / r.ideal.Seconds() }

func (r result) String() string {
	mo := "merge_overhead=n/a(no lanes at parallel 1)"
	if len(r.mergeOverhead) > 0 {
		m, x := meanMax(r.mergeOverhead)
		mo = fmt.Sprintf("merge_overhead_ms mean=%.0f max=%.0f (chains=%d)", m, x, len(r.mergeOverhead))
	}
	gm, gx := meanMax(r.gaps)
	return fmt.Sprintf("workers=%d messages=%d wall_s=%.2f ideal_s=%.2f ratio=%.3f max_concurrent=%d %s next_in_chain_ms mean=%.0f max=%.0f pickup_ms=%.0f load1=%s->%s",
		r.workers, r.messages, r.wall.Seconds(), r.ideal.Seconds(), r.ratio(), r.maxConcurrent, mo, gm, gx, ms(r.pickup), r.loadBefore, r.loadAfter)
}

// measure runs the chains on w workers with parallel: w.
func (p params) measure(w int) (res result, err error) {
	e, err := p.start(w)
	defer e.close()
	if err != nil {
		return res, err
	}
	res = result{workers: w, chains: p.chains, messages: p.chains * p.len, loadBefore: benchproj.LoadAvg()}
	res.ideal = time.Duration(res.messages) * p.sleep / time.Duration(min(w, p.chains))
	start := time.Now()
	err = benchproj.Queue(e.dir, p.chains, func(i int) string {
		return fmt.Sprintf("file=c%d len=%d sleep=%g\n", i, p.len, p.sleep.Seconds())
	})
	if err != nil {
		return res, err
	}
	if err := e.waitIdle(res.messages, 10*time.Minute); err != nil {
		return res, err
	}
	res.loadAfter = benchproj.LoadAvg()
	spans, err := e.spans()
	if err != nil {
		return res, err
	}
	if len(spans) != res.messages {
		return res, fmt.Errorf("the ledger has %d messages, want %d", len(spans), res.messages)
	}
	res.maxConcurrent = maxConcurrent(spans)
	res.gaps = chainGaps(spans)
	for i := 0; i < p.chains; i++ {
		got := strings.Fields(readFile(filepath.Join(e.dir, "out", fmt.Sprintf("c%d.txt", i))))
		if len(got) != p.len {
			return res, fmt.Errorf("out/c%d.txt holds %v, want the chain's %d messages", i, got, p.len)
		}
	}
	evs, err := readEvents(e.dir)
	if err != nil {
		return res, err
	}
	// The run is timed from its first message taken to its last message
	// done or chain merged, both from events.jsonl: files dropped into the
	// inbox are noticed on the controller's next poll (1 s), a cost of
	// dropping files by hand that clients submitting through the socket do
	// not pay; it is printed as pickup.
	var first, last time.Time
	lastDone := map[string]time.Time{}
	for _, ev := range evs {
		switch ev.Kind {
		case "lane_opened", "message_started":
			if first.IsZero() || ev.Time.Before(first) {
				first = ev.Time
			}
		case "message_done", "chain_merged":
			if ev.Time.After(last) {
				last = ev.Time
			}
		}
		if ev.Kind == "message_done" && ev.Time.After(lastDone[ev.Chain]) {
			lastDone[ev.Chain] = ev.Time
		}
	}
	if first.IsZero() || last.IsZero() {
		return res, fmt.Errorf("events.jsonl has no message_started or no message_done")
	}
	res.wall, res.pickup = last.Sub(first), first.Sub(start)
	for _, ev := range evs {
		if ev.Kind == "chain_merged" {
			if d, ok := lastDone[ev.Chain]; ok {
				res.mergeOverhead = append(res.mergeOverhead, ev.Time.Sub(d))
			}
		}
	}
	if w > 1 && len(res.mergeOverhead) != p.chains {
		return res, fmt.Errorf("%d chain_merged events with a message_done before, want %d", len(res.mergeOverhead), p.chains)
	}
	return res, nil
}

// waitIdle waits until n messages are done, the inbox is empty and no
// lane is left; a dead letter ends the run.
func (e *env) waitIdle(n int, limit time.Duration) error {
	inbox := filepath.Join(e.dir, ".decree", "inbox")
	dead := false
	err := poll(limit, fmt.Sprintf("%d messages done and every chain merged", n), func() bool {
		if countMD(filepath.Join(inbox, "dead")) > 0 {
			dead = true
			return true
		}
		return countMD(filepath.Join(inbox, "done")) >= n && countMD(inbox) == 0 && laneDirs(e.dir) == 0
	})
	if dead {
		notes, _ := filepath.Glob(filepath.Join(inbox, "dead", "*.dead.txt"))
		var b strings.Builder
		for _, n := range notes {
			b.WriteString(readFile(n))
		}
		return fmt.Errorf("a message was dead-lettered:\n%s", b.String())
	}
	return err
}

// laneDirs counts the lanes left in .decree/lanes.
func laneDirs(dir string) int {
	ents, _ := os.ReadDir(filepath.Join(dir, ".decree", "lanes"))
	n := 0
	for _, d := range ents {
		if d.IsDir() {
			n++
		}
	}
	return n
}

// span is one message's run as the ledger has it.
type span struct {
	id         string
	start, end float64
	starts     int
}

// spans reads the ledger; a message started twice is an error.
func (e *env) spans() (map[string]*span, error) {
	out := map[string]*span{}
	for _, line := range strings.Split(strings.TrimSpace(readFile(e.ledger)), "\n") {
		f := strings.Fields(line)
		if len(f) != 3 {
			continue
		}
		t, _ := strconv.ParseFloat(f[1], 64)
		s := out[f[0]]
		if s == nil {
			s = &span{id: f[0]}
			out[f[0]] = s
		}
		if f[2] == "start" {
			s.start = t
			s.starts++
		} else {
			s.end = t
		}
	}
	for id, s := range out {
		if s.starts != 1 || s.end == 0 {
			return nil, fmt.Errorf("message %s started %d times (ended: %v); want exactly once", id, s.starts, s.end != 0)
		}
	}
	return out, nil
}

// maxConcurrent is the most messages running at one instant.
func maxConcurrent(spans map[string]*span) int {
	type edge struct {
		t float64
		d int
	}
	var es []edge
	for _, s := range spans {
		es = append(es, edge{s.start, 1}, edge{s.end, -1})
	}
	sort.Slice(es, func(i, j int) bool {
		if es[i].t != es[j].t {
			return es[i].t < es[j].t
		}
		return es[i].d < es[j].d
	})
	n, m := 0, 0
	for _, e := range es {
		n += e.d
		m = max(m, n)
	}
	return m
}

// chainGaps lists, per chain, the times from a message's end to the
// next message's start (message ids are <chain>-<seq>).
func chainGaps(spans map[string]*span) []time.Duration {
	byChain := map[string][]*span{}
	for id, s := range spans {
		if i := strings.LastIndex(id, "-"); i > 0 {
			byChain[id[:i]] = append(byChain[id[:i]], s)
		}
	}
	var out []time.Duration
	for _, ss := range byChain {
		sort.Slice(ss, func(i, j int) bool { return ss[i].start < ss[j].start })
		for i := 1; i < len(ss); i++ {
			out = append(out, time.Duration((ss[i].start-ss[i-1].end)*float64(time.Second)))
		}
	}
	return out
}

// meanMax is the mean and the maximum of ds in milliseconds.
func meanMax(ds []time.Duration) (float64, float64) {
	if len(ds) == 0 {
		return 0, 0
	}
	var sum, mx time.Duration
	for _, d := range ds {
		sum += d
		mx = max(mx, d)
	}
	return ms(sum / time.Duration(len(ds))), ms(mx)
}

// event is the part of an events.jsonl line the benchmark reads.
type event struct {
	Time      time.Time `json:"time"`
	Kind      string    `json:"kind"`
	MessageID string    `json:"message_id"`
	Chain     string    `json:"chain"`
	Text      string    `json:"text"`
}

func readEvents(dir string) ([]event, error) {
	f, err := os.Open(filepath.Join(dir, ".decree", "events.jsonl"))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []event
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		var ev event
		if json.Unmarshal(sc.Bytes(), &ev) == nil {
			out = append(out, ev)
		}
	}
	return out, sc.Err()
}

func countMD(dir string) int {
	ents, _ := os.ReadDir(dir)
	n := 0
	for _, e := range ents {
		if !e.IsDir() && strings.HasSuffix(e.Name(), ".md") {
			n++
		}
	}
	return n
}

func readFile(path string) string {
	b, _ := os.ReadFile(path)
	return string(b)
}

// poll checks cond every 20 ms until it holds or limit passed.
func poll(limit time.Duration, what string, cond func() bool) error {
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			return errors.New("timed out waiting for " + what)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return nil
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func mean(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := 0.0
	for _, x := range xs {
		s += x
	}
	return s / float64(len(xs))
}

func fmtList(xs []float64) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = fmt.Sprintf("%.3f", x)
	}
	return strings.Join(s, ",")
}
