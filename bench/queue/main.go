// Command queue-bench measures how decree's per-message cost depends on the
// queue: with Q messages queued in the inbox (1, 1,000, 10,000 by default)
// on a project of F files, a separate decree-controller and decree-worker
// process K messages: the first queued message and the chain of K-1
// follow-ups it spawns one after the other (depth-first, so the other Q-1
// stay queued all along and every processed message does the same work).
// The same routine run K times by bash directly in the same run is the
// reference. While the messages run,
// C clients poll GetStatus over the controller's socket; their latencies
// are reported. Peak RSS is the controller process's.
//
//	queue-bench -bin DIR [-queues 1,1000,10000] [-k 100] [-files 1000] [-clients 20]
//
// Output, one line per queue length:
//
//	queued=1000 ms_per_message=... overhead_ms=... bash_ms=... status_p50_ms=... status_p95_ms=... controller_maxrss_mb=...
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/decreehq/decree/bench/internal/benchproj"
	decreev1 "github.com/decreehq/decree/proto/decree/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

func main() {
	bin := flag.String("bin", "", "directory holding the built decree-controller and decree-worker")
	queues := flag.String("queues", "1,1000,10000", "queue lengths, comma-separated")
	k := flag.Int("k", 100, "messages processed and timed per queue length")
	files := flag.Int("files", 1000, "files in the project tree")
	clients := flag.Int("clients", 20, "clients polling status while messages run")
	flag.Parse()
	if *bin == "" {
		fmt.Fprintln(os.Stderr, "queue-bench: -bin is required")
		os.Exit(2)
	}
	bash := bashMs(*k)
	// Projects are removed only at the end: freeing thousands of inodes
	// makes file creations slower for a minute on some file systems (ext4
	// without a journal skips recently freed inodes), which would charge
	// one measurement for the clean-up of the one before.
	defer func() {
		for _, d := range projects {
			os.RemoveAll(d)
		}
	}()
	// An untimed first round: the first controller and worker of a run
	// were measured 2-3 ms per message slower than later ones, whatever
	// the queue; the cause is not pinned down.
	if err := measure(*bin, 1, 20, *files, *clients, bash, true); err != nil {
		fmt.Fprintln(os.Stderr, "queue-bench: warm-up:", err)
	}
	for _, q := range strings.Split(*queues, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(q))
		if err != nil || n < 1 {
			fmt.Fprintf(os.Stderr, "queue-bench: bad queue length %q\n", q)
			os.Exit(2)
		}
		if err := measure(*bin, n, *k, *files, *clients, bash, false); err != nil {
			fmt.Fprintln(os.Stderr, "queue-bench:", err)
			for _, d := range projects {
				os.RemoveAll(d)
			}
			os.Exit(1)
		}
	}
}

// bashMs is the reference: milliseconds per run of the routine by bash.
func bashMs(k int) float64 {
	dir, _ := os.MkdirTemp("", "decree-queuebench-bash-")
	projects = append(projects, dir)
	p := filepath.Join(dir, "r.sh")
	_ = os.WriteFile(p, []byte(benchproj.Routine), 0o755)
	_ = os.MkdirAll(filepath.Join(dir, ".decree", "inbox"), 0o755)
	start := time.Now()
	for i := 0; i < k; i++ {
		cmd := exec.Command("bash", p)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "chain=2026010100000000", "seq="+strconv.Itoa(i), "last="+strconv.Itoa(k-1))
		_ = cmd.Run()
	}
	return float64(time.Since(start).Microseconds()) / 1000 / float64(k)
}

// projects are the benchmark's project directories, removed at the end.
var projects []string

// measure runs one queue length; quiet measures without printing.
func measure(bin string, queued, k, files, clients int, bashMs float64, quiet bool) error {
	dir, err := project(files, queued, k)
	if err != nil {
		return err
	}
	projects = append(projects, dir)
	benchproj.Settle()
	ctl := exec.Command(filepath.Join(bin, "decree-controller"), "--project", dir)
	ctl.Stderr = nil
	if err := ctl.Start(); err != nil {
		return err
	}
	defer func() { _ = ctl.Process.Kill(); _ = ctl.Wait() }()
	sock := filepath.Join(dir, ".decree", "decree.sock")
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	client := decreev1.NewControllerServiceClient(conn)
	deadline := time.Now().Add(120 * time.Second)
	for {
		if _, err := client.GetStatus(context.Background(), &decreev1.GetStatusRequest{}); err == nil {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the controller did not serve within 120 s")
		}
		time.Sleep(50 * time.Millisecond)
	}
	// Pollers start with the worker: status is measured while messages run.
	ctx, stop := context.WithCancel(context.Background())
	var mu sync.Mutex
	var lat []time.Duration
	var wg sync.WaitGroup
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				t := time.Now()
				if _, err := client.GetStatus(ctx, &decreev1.GetStatusRequest{}); err == nil {
					mu.Lock()
					lat = append(lat, time.Since(t))
					mu.Unlock()
				}
				time.Sleep(50 * time.Millisecond)
			}
		}()
	}
	wrk := exec.Command(filepath.Join(bin, "decree-worker"), "--controller", "unix://"+sock, "--workspace", dir, "--id", "bench")
	wrk.Stderr = nil
	start := time.Now()
	if err := wrk.Start(); err != nil {
		stop()
		return err
	}
	defer func() { _ = wrk.Process.Kill(); _ = wrk.Wait() }()
	// Time from the first message done to the k-th: worker start-up and
	// the first checkpoint are not per-message costs.
	var first time.Time
	doneDir := filepath.Join(dir, ".decree", "inbox", "done")
	for {
		n := count(doneDir)
		if n >= 1 && first.IsZero() {
			first = time.Now()
		}
		if n >= k {
			break
		}
		if dead := count(filepath.Join(dir, ".decree", "inbox", "dead")); dead > 0 {
			stop()
			notes, _ := exec.Command("bash", "-c", "cat "+filepath.Join(dir, ".decree", "inbox", "dead")+"/*.dead.txt").Output()
			return fmt.Errorf("queued=%d: a message was dead-lettered after %d done:\n%s", queued, n, notes)
		}
		if time.Since(start) > 10*time.Minute {
			stop()
			return fmt.Errorf("queued=%d: only %d of %d messages done in 10 minutes", queued, n, k)
		}
		time.Sleep(2 * time.Millisecond)
	}
	elapsed := time.Since(first)
	stop()
	wg.Wait()
	per := float64(elapsed.Microseconds()) / 1000 / float64(max(k-1, 1))
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	pct := func(p float64) float64 {
		if len(lat) == 0 {
			return 0
		}
		return float64(lat[int(p*float64(len(lat)-1))].Microseconds()) / 1000
	}
	if quiet {
		return nil
	}
	fmt.Printf("queued=%d files=%d k=%d ms_per_message=%.2f overhead_ms=%.2f bash_ms=%.2f ratio=%.1f status_p50_ms=%.2f status_p95_ms=%.2f status_calls=%d controller_maxrss_mb=%.1f\n",
		queued, files, k, per, per-bashMs, bashMs, per/bashMs, pct(0.5), pct(0.95), len(lat), float64(maxRSSkB(ctl.Process.Pid))/1024)
	return nil
}

func count(dir string) int {
	ents, _ := os.ReadDir(dir)
	n := 0
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".md") {
			n++
		}
	}
	return n
}

// maxRSSkB reads VmHWM (peak resident set) of a running process.
func maxRSSkB(pid int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			f := strings.Fields(rest)
			if len(f) > 0 {
				n, _ := strconv.Atoi(f[0])
				return n
			}
		}
	}
	return 0
}

// project creates a decree project with a tree of files and queued root
// messages, each of its own chain, named "<chain>-0.md" so that none needs
// a chain assigned when the controller starts.
func project(files, queued, k int) (string, error) {
	dir, err := benchproj.New("decree-queuebench-", files, k+10, "develop")
	if err != nil {
		return "", err
	}
	err = benchproj.Queue(dir, queued, func(i int) string {
		if i == 0 {
			return fmt.Sprintf("---\nlast: %d\n---\nthe chain that runs\n", k-1)
		}
		return fmt.Sprintf("queued message %d\n", i)
	})
	if err != nil {
		return "", err
	}
	return dir, nil
}
