package main

// The KEDA emulation: the real controller, and one-shot workers started the
// way KEDA's ScaledJob with scalingStrategy "accurate" starts Jobs, from the
// metric the controller exports. No cluster: every piece is a real process.

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/decreehq/decree/controller/metrics"
	"github.com/decreehq/decree/internal/testtool"
)

// kedaRoutine is the stand-in routine: it writes "start" and "done" lines
// to a ledger outside the project, tagged with the Job (worker process)
// that ran it. The first attempt of a message whose body says HOLD waits
// for a gate the test never opens, so its worker is killed mid-attempt.
const kedaRoutine = `#!/usr/bin/env bash
set -euo pipefail
echo "start $message_id $DECREE_ATTEMPT $JOB" >> "$LEDGER"
if grep -q HOLD "$message_file" && [ "$DECREE_ATTEMPT" = 1 ]; then
  echo "hold $message_id $DECREE_ATTEMPT $JOB" >> "$LEDGER"
  for _ in $(seq 1200); do sleep 0.05; [ -e "$LEDGER.gate" ] && break; done
fi
echo "changed by $message_id" > "out-$message_id.txt"
echo "done $message_id $DECREE_ATTEMPT $JOB" >> "$LEDGER"
`

// kedaJob is one Job the emulated KEDA started: a decree-worker process.
type kedaJob struct {
	name string
	proc *testtool.Proc
}

func (j *kedaJob) exited() bool {
	select {
	case <-j.proc.Done():
		return true
	default:
		return false
	}
}

// registered: the Job's pod is running in KEDA's terms (the worker is up
// and registered); before that it counts as pending.
func (j *kedaJob) registered() bool {
	return strings.Contains(j.proc.Out.String(), "registered with the controller")
}

// kedaAccurate is KEDA's "accurate" scaling strategy for ScaledJobs: how
// many new Jobs to create for a queue length, given the Jobs still running
// and those not yet running (pending).
func kedaAccurate(queueLength, targetAverageValue float64, running, pending, maxReplicaCount int64) int64 {
	maxScale := int64(math.Ceil(queueLength / targetAverageValue))
	if maxScale > maxReplicaCount {
		maxScale = maxReplicaCount
	}
	var n int64
	if maxScale+running > maxReplicaCount {
		n = maxReplicaCount - running
	} else {
		n = maxScale - pending
	}
	return max(n, 0)
}

func TestKedaAccurateFormula(t *testing.T) {
	tests := []struct {
		q                      float64
		running, pending, maxR int64
		want                   int64
	}{
		{0, 0, 0, 5, 0},
		{3, 0, 0, 5, 3},
		{3, 2, 0, 5, 3}, // running Jobs hold work that the metric no longer counts
		{3, 2, 2, 5, 1}, // two Jobs not yet running will take two of the three
		{4, 3, 0, 5, 2}, // capped by maxReplicaCount
		{9, 0, 0, 5, 5},
		{1, 5, 0, 5, 0},
	}
	for _, tt := range tests {
		if got := kedaAccurate(tt.q, 1, tt.running, tt.pending, tt.maxR); got != tt.want {
			t.Errorf("accurate(q=%v, running=%d, pending=%d, max=%d) = %d, want %d", tt.q, tt.running, tt.pending, tt.maxR, got, tt.want)
		}
	}
}

// TestKEDAEmulation: five messages, no worker. The test polls /metrics
// every 100ms like KEDA's pollingInterval, applies the accurate formula to
// decree_runnable_attempts and starts one-shot workers (--exit-after 1
// --exit-when-idle 2s) as Jobs. One worker is killed with SIGKILL during an
// attempt; its lease runs out, the retry is started by a new Job. Every
// message runs to done exactly once (one "done" line each in a ledger the
// routine writes outside the project), no Job ran more than one attempt,
// every Job but the killed one exits 0 by itself, and the metrics show the
// counters that moved.
func TestKEDAEmulation(t *testing.T) {
	testtool.Require(t, "bash")
	bin := testtool.Binaries(t)
	project := testtool.InitProject(t)
	if err := os.WriteFile(filepath.Join(project, ".decree", "routines", "develop.sh"), []byte(kedaRoutine), 0o755); err != nil {
		t.Fatal(err)
	}
	ledger := filepath.Join(t.TempDir(), "ledger")
	const messages = 5
	for i := range messages {
		body := fmt.Sprintf("task %d\n", i)
		if i == 1 {
			body += "HOLD\n"
		}
		if err := os.WriteFile(filepath.Join(project, ".decree", "inbox", fmt.Sprintf("task-%d.md", i)), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ctl := exec.Command(filepath.Join(bin, "decree-controller"), "--project", project, "--lease-ttl", "2s", "--metrics-listen", "127.0.0.1:0")
	ctl.Env = testtool.CleanEnv()
	url, sock, _ := startWithMetrics(t, ctl)

	var (
		mu   sync.Mutex
		jobs []*kedaJob
	)
	startJob := func() {
		mu.Lock()
		defer mu.Unlock()
		name := fmt.Sprintf("job-%d", len(jobs))
		cmd := exec.Command(filepath.Join(bin, "decree-worker"), "--controller", "unix://"+sock, "--workspace", project,
			"--id", name, "--exit-after", "1", "--exit-when-idle", "2s")
		cmd.Env = append(testtool.CleanEnv(), "LEDGER="+ledger, "JOB="+name)
		jobs = append(jobs, &kedaJob{name: name, proc: testtool.Start(t, name, cmd)})
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	scaler := make(chan struct{})
	go func() {
		defer close(scaler)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			s, err := scrape(url)
			if err != nil {
				continue
			}
			var running, pending int64
			mu.Lock()
			for _, j := range jobs {
				switch {
				case j.exited():
				case j.registered():
					running++
				default:
					running++
					pending++
				}
			}
			mu.Unlock()
			for range kedaAccurate(s.value(metrics.RunnableMetric), 1, running, pending, 3) {
				startJob()
			}
		}
	}()

	// Kill the Job running the held attempt as soon as it has started.
	var victim string
	testtool.WaitFor(t, 60*time.Second, "the held attempt to start", func() bool {
		victim = heldJob(ledger)
		return victim != ""
	})
	mu.Lock()
	for _, j := range jobs {
		if j.name == victim {
			j.proc.Signal(syscall.SIGKILL)
		}
	}
	mu.Unlock()

	var last samples
	testtool.WaitFor(t, 120*time.Second, "every message to be done", func() bool {
		s, err := scrape(url)
		if err == nil {
			last = s
		}
		entries, _ := os.ReadDir(filepath.Join(project, ".decree", "inbox", "done"))
		return len(entries) == messages && err == nil && s.value("decree_messages_finished_total", `outcome="done"`) == messages
	})
	// Workers exit by themselves once idle: stop scaling only after all
	// Jobs are gone (new ones may still be started while the last
	// message's lease is being handed out).
	testtool.WaitFor(t, 60*time.Second, "every Job to exit", func() bool {
		mu.Lock()
		defer mu.Unlock()
		for _, j := range jobs {
			if !j.exited() {
				return false
			}
		}
		return true
	})
	cancel()
	<-scaler

	lines := readLines(t, ledger)
	done := map[string][]string{}
	starts := map[string]int{}
	perJob := map[string]int{}
	for _, l := range lines {
		f := strings.Fields(l)
		if len(f) != 4 {
			t.Fatalf("ledger line %q", l)
		}
		switch f[0] {
		case "start":
			starts[f[1]]++
			perJob[f[3]]++
		case "done":
			done[f[1]] = append(done[f[1]], f[3])
		}
	}
	if len(done) != messages {
		t.Errorf("%d messages done in the ledger, want %d:\n%s", len(done), messages, strings.Join(lines, "\n"))
	}
	retried := 0
	for id, by := range done {
		if len(by) != 1 {
			t.Errorf("message %s finished %d times (by %v), want exactly once", id, len(by), by)
		}
		if by[0] == victim {
			t.Errorf("message %s finished by the killed Job %s", id, victim)
		}
		switch starts[id] {
		case 1:
		case 2:
			retried++
		default:
			t.Errorf("message %s started %d times", id, starts[id])
		}
	}
	if retried != 1 {
		t.Errorf("%d messages were retried, want exactly the held one:\n%s", retried, strings.Join(lines, "\n"))
	}
	for job, n := range perJob {
		if n > 1 {
			t.Errorf("Job %s ran %d attempts with --exit-after 1", job, n)
		}
	}
	mu.Lock()
	for _, j := range jobs {
		if j.name == victim {
			continue
		}
		if code := j.proc.Wait(t, time.Second); code != 0 {
			t.Errorf("Job %s exited %d, want 0\n%s", j.name, code, j.proc.Out)
		}
	}
	t.Logf("%d Jobs started for %d messages", len(jobs), messages)
	mu.Unlock()

	// A Job that finds no work (minReplicaCount 1, or a scale-up that came
	// too late) leaves by itself once idle, with exit code 0.
	startJob()
	idle := jobs[len(jobs)-1]
	if code := idle.proc.Wait(t, 30*time.Second); code != 0 || !strings.Contains(idle.proc.Out.String(), "no work came") {
		t.Errorf("idle Job exited %d\n%s", code, idle.proc.Out)
	}

	for _, c := range []struct {
		name, label string
		want        float64
	}{
		{"decree_attempts_total", `outcome="succeeded"`, messages},
		{"decree_attempts_total", `outcome="worker_lost"`, 1},
		{"decree_leases_lost_total", "", 1},
		{"decree_messages_finished_total", `outcome="done"`, messages},
		{metrics.RunnableMetric, "", 0},
		{"decree_messages_queued", "", 0},
		{"decree_attempt_duration_seconds_count", "", messages + 1},
		{"decree_queue_wait_seconds_count", "", messages},
	} {
		if got := last.value(c.name, c.label); got != c.want {
			t.Errorf("%s{%s} = %v, want %v", c.name, c.label, got, c.want)
		}
	}
	// No series carries an id: only the labels metrics documents exist.
	allowed := map[string]bool{"kind": true, "routine": true, "outcome": true, "reason": true, "state": true, "le": true, "quantile": true, "version": true}
	for _, l := range last.lines {
		series, _, _ := strings.Cut(l, " ")
		if !strings.HasPrefix(series, "decree_") {
			continue
		}
		for _, m := range labelName.FindAllStringSubmatch(series, -1) {
			if !allowed[m[1]] {
				t.Errorf("series %s has label %q", series, m[1])
			}
		}
	}
}

var labelName = regexp.MustCompile(`[{,]([a-zA-Z_][a-zA-Z0-9_]*)="`)

// heldJob is the Job whose ledger line says it holds the held message's
// first attempt ("" until then).
func heldJob(ledger string) string {
	data, err := os.ReadFile(ledger)
	if err != nil {
		return ""
	}
	for _, l := range strings.Split(string(data), "\n") {
		if f := strings.Fields(l); len(f) == 4 && f[0] == "hold" {
			return f[3]
		}
	}
	return ""
}

func readLines(t *testing.T, path string) []string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSpace(string(data)), "\n")
}

// startWithMetrics starts a decree-controller (Stdout unset) and waits for
// its "metrics on URL" and unix socket lines.
func startWithMetrics(t *testing.T, cmd *exec.Cmd) (url, sock string, p *testtool.Proc) {
	t.Helper()
	pr, pw := io.Pipe()
	cmd.Stdout = pw
	p = testtool.Start(t, "decree-controller", cmd)
	type line struct{ url, sock string }
	got := make(chan line, 4)
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			if a, ok := strings.CutPrefix(sc.Text(), "metrics on "); ok {
				got <- line{url: a}
			}
			if a, ok := strings.CutPrefix(sc.Text(), "listening on "); ok && strings.HasSuffix(a, ".sock") {
				got <- line{sock: a}
			}
		}
	}()
	go func() { <-p.Done(); pw.Close() }()
	deadline := time.After(30 * time.Second)
	for url == "" || sock == "" {
		select {
		case l := <-got:
			url, sock = url+l.url, sock+l.sock
		case <-p.Done():
			t.Fatalf("decree-controller exited: %v\n%s", p.Err(), p.Out)
		case <-deadline:
			t.Fatalf("decree-controller printed no metrics URL and socket within 30s\n%s", p.Out)
		}
	}
	return url, sock, p
}

// samples are the series of one scrape, as "name{labels} value" lines.
type samples struct{ lines []string }

func scrape(url string, header ...string) (samples, error) {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return samples{}, err
	}
	if len(header) == 2 {
		req.Header.Set(header[0], header[1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return samples{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return samples{}, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	var s samples
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if l := sc.Text(); l != "" && !strings.HasPrefix(l, "#") {
			s.lines = append(s.lines, l)
		}
	}
	return s, sc.Err()
}

// value sums the series named name whose labels contain every one of
// labels (`key="value"`, "" for any).
func (s samples) value(name string, labels ...string) float64 {
	var sum float64
	for _, l := range s.lines {
		series, v, ok := strings.Cut(l, " ")
		if !ok {
			continue
		}
		n, lbl, _ := strings.Cut(series, "{")
		if n != name {
			continue
		}
		match := true
		for _, want := range labels {
			if want != "" && !strings.Contains(lbl, want) {
				match = false
			}
		}
		if f, err := strconv.ParseFloat(strings.Fields(v)[0], 64); err == nil && match {
			sum += f
		}
	}
	return sum
}
