// Command status-bench times `decreectl status` with no controller running
// (decreectl then opens the project itself, without processing) on a
// project with 1 message queued and on one with Q queued (default
// 10,000), interleaved, and prints the median of each and their ratio:
// flat means close to 1.
//
//	status-bench -decreectl PATH [-queued 10000] [-runs 7]
//	status-bench -profile cpu.pprof [-queued 10000]
//
// A second line does the same with the history instead of the queue: 1
// message processed against Q (their run directories and done/ files).
//
// -profile runs the status of the larger project in this process
// (cli.Main) 30 times under the CPU profiler.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"sort"
	"time"

	"github.com/decreehq/decree/bench/internal/benchproj"
	"github.com/decreehq/decree/cmd/decreectl/cli"
	"github.com/decreehq/decree/pkg/layout"
)

func main() {
	ctl := flag.String("decreectl", "", "path of the built decreectl")
	queued := flag.Int("queued", 10000, "messages queued in the larger project")
	runs := flag.Int("runs", 7, "interleaved runs; the median is printed")
	prof := flag.String("profile", "", "profile the status of the larger project in-process into this file")
	flag.Parse()
	if *prof != "" {
		if err := profile(*prof, *queued); err != nil {
			fmt.Fprintln(os.Stderr, "status-bench:", err)
			os.Exit(1)
		}
		return
	}
	if *ctl == "" {
		fmt.Fprintln(os.Stderr, "status-bench: -decreectl PATH is required")
		os.Exit(2)
	}
	if err := run(*ctl, *queued, *runs); err != nil {
		fmt.Fprintln(os.Stderr, "status-bench:", err)
		os.Exit(1)
	}
}

func run(ctl string, queued, runs int) error {
	if err := compare(ctl, "status   ", "queued", queued, runs, func(dir string, n int) error {
		return benchproj.Queue(dir, n, func(i int) string { return fmt.Sprintf("queued message %d\n", i) })
	}); err != nil {
		return err
	}
	return compare(ctl, "status   ", "done", queued, runs, history)
}

// history makes n processed messages: a done/ file and a finished run
// directory each, as decree leaves them.
func history(dir string, n int) error {
	for i := 0; i < n; i++ {
		id := fmt.Sprintf("2025010100000000-%d", i)
		if err := os.WriteFile(filepath.Join(layout.Path(dir, layout.Done), id+".md"), []byte("done\n"), 0o644); err != nil {
			return err
		}
		rd := layout.Path(dir, layout.Runs, id)
		if err := os.MkdirAll(rd, 0o755); err != nil {
			return err
		}
		st := fmt.Sprintf(`{"message_id":%q,"file":%q,"routine":"noop","outcome":"succeeded","attempts":[]}`+"\n", id, id+".md")
		for name, data := range map[string]string{layout.StateFile: st, layout.RunFile: "{}\n", layout.MessageFile: "done\n"} {
			if err := os.WriteFile(filepath.Join(rd, name), []byte(data), 0o644); err != nil {
				return err
			}
		}
	}
	return nil
}

// compare times status on a project with 1 and with n of what fill makes.
func compare(ctl, label, what string, n, runs int, fill func(dir string, n int) error) error {
	var dirs [2]string
	for i, q := range []int{1, n} {
		dir, err := benchproj.New("decree-statusbench-", 1000, 10, "noop")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		if err := fill(dir, q); err != nil {
			return err
		}
		dirs[i] = dir
	}
	benchproj.Settle()
	// A queue a person looks at was written more than two seconds ago;
	// within that window a store cannot trust its own listing from the
	// open (see store.openListing) and lists the inbox a second time.
	time.Sleep(2 * time.Second)
	var times [2][]float64
	for r := 0; r < runs+1; r++ {
		for i, dir := range dirs {
			cmd := exec.Command(ctl, "-C", dir, "status")
			cmd.Env = append(os.Environ(), "DECREE_CONTROLLER=")
			start := time.Now()
			if out, err := cmd.CombinedOutput(); err != nil {
				return fmt.Errorf("decreectl status: %v\n%s", err, out)
			}
			if r > 0 { // the first round warms the page cache
				times[i] = append(times[i], time.Since(start).Seconds())
			}
		}
	}
	one, many := median(times[0]), median(times[1])
	fmt.Printf("%s %s=1 ms=%.1f %s=%d ms=%.1f ratio=%.2f load=%s\n", label, what, one*1000, what, n, many*1000, many/one, benchproj.LoadAvg())
	return nil
}

func profile(out string, queued int) error {
	dir, err := benchproj.New("decree-statusbench-", 1000, 10, "noop")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if err := benchproj.Queue(dir, queued, func(i int) string { return fmt.Sprintf("queued message %d\n", i) }); err != nil {
		return err
	}
	time.Sleep(2 * time.Second) // as in run: a queue written a while ago
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	defer f.Close()
	os.Setenv("DECREE_CONTROLLER", "")
	if err := pprof.StartCPUProfile(f); err != nil {
		return err
	}
	defer pprof.StopCPUProfile()
	for i := 0; i < 30; i++ {
		if code := cli.Main(context.Background(), []string{"-C", dir, "status"}, nil, io.Discard, io.Discard); code != 0 {
			return fmt.Errorf("decreectl status exited %d", code)
		}
	}
	return nil
}

func median(xs []float64) float64 {
	sort.Float64s(xs)
	return xs[len(xs)/2]
}
