// Command pipeline-bench measures decree's per-message overhead: a chain of
// N trivial messages (each routine queues the next follow-up and exits 0)
// on a project of F files, run through the built decreectl, against the
// same routine run N times by bash directly in the same run.
//
//	pipeline-bench -decreectl PATH [-n 200] [-files 1000] [-queued 0] [-runs 3]
//	pipeline-bench -profile DIR [-n 200] [-files 1000] [-queued 0]
//
// -queued Q puts Q messages of other chains in the inbox first; decreectl
// run leaves them queued (it processes only its own chain), so every
// message of the chain is processed with Q others waiting.
//
// -ralph also times the loop most users write by hand without decree, a
// "ralph loop": bash routine.sh && git add -A && git commit -q, once per
// message, on a committed git repository of the same tree (.decree/
// excluded). The routine then also appends a line to a tracked file, so
// every message changes the tree and every commit has something to commit.
// The loop's first commit is not timed, and neither is decree's first
// checkpoint of the tree (object store and stat cache): both tools start
// from a tree they have seen. decree's controller then walks the tree once
// more at its first message (through that stat cache) to set up its
// watches, and that is timed.
// The three are interleaved within each run, and each line carries the
// load average.
//
// -profile runs decreectl in this process (cli.Main) once and writes
// cpu.pprof, the blocking and mutex profiles and an execution trace
// (trace.out) into DIR.
//
// It prints one line per measurement and a summary:
//
//	bash      n=200 seconds=...
//	decree    n=200 seconds=... maxrss_mb=...
//	overhead  ms_per_message=... ratio=...
//	ralph     n=200 seconds=... ms_per_message=... decree_over_ralph=... load=...
//
// Peak RSS is the decreectl process's (controller and worker are embedded
// in it); routines are separate processes and not counted. Memory is flat
// when the peak RSS of a chain of N/4 messages and of N messages are close:
// both are printed.
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
	"syscall"
	"time"

	"github.com/decreehq/decree/bench/internal/benchproj"
	"github.com/decreehq/decree/pkg/checkpoint"
	"github.com/decreehq/decree/pkg/layout"
)

func main() {
	ctl := flag.String("decreectl", "", "path of the built decreectl")
	n := flag.Int("n", 200, "messages in the chain")
	files := flag.Int("files", 1000, "files in the project tree")
	runs := flag.Int("runs", 3, "repetitions; the median is reported")
	prof := flag.String("profile", "", "profile one in-process run into this directory")
	flag.IntVar(&queued, "queued", 0, "messages of other chains queued in the inbox")
	flag.BoolVar(&ralph, "ralph", false, "also time bash + git add -A + git commit per message")
	flag.Parse()
	if *prof != "" {
		if err := profile(*prof, *n, *files); err != nil {
			fmt.Fprintln(os.Stderr, "pipeline-bench:", err)
			os.Exit(1)
		}
		return
	}
	if *ctl == "" {
		fmt.Fprintln(os.Stderr, "pipeline-bench: -decreectl PATH is required")
		os.Exit(2)
	}
	if err := run(*ctl, *n, *files, *runs); err != nil {
		fmt.Fprintln(os.Stderr, "pipeline-bench:", err)
		os.Exit(1)
	}
}

// Projects are removed only when the benchmark ends: freeing thousands of
// inodes makes later file creations slower on some file systems (ext4
// without a journal skips inodes freed in the last minute), which would
// charge one measurement for the clean-up of the one before.
func run(ctl string, n, files, runs int) error {
	var dirs []string
	defer func() {
		for _, d := range dirs {
			os.RemoveAll(d)
		}
	}()
	var bashS, decreeS, ralphS []float64
	var rss, rssSmall int64
	for i := 0; i < runs; i++ {
		dir, err := project(files, n)
		if err != nil {
			return err
		}
		benchproj.Settle()
		b, err := viaBash(dir, n)
		if err != nil {
			return err
		}
		var g float64
		if ralph {
			rdir, err := project(files, n)
			if err != nil {
				return err
			}
			dirs = append(dirs, rdir)
			if g, err = viaRalph(rdir, n); err != nil {
				return err
			}
			ralphS = append(ralphS, g)
		}
		d, r, err := viaDecree(ctl, dir, n)
		if err != nil {
			return err
		}
		dirs = append(dirs, dir)
		bashS, decreeS = append(bashS, b), append(decreeS, d)
		rss = max(rss, r)
		fmt.Printf("run %d: bash seconds=%.3f ralph seconds=%.3f decree seconds=%.3f maxrss_mb=%.1f load=%s\n", i+1, b, g, d, float64(r)/1024, benchproj.LoadAvg())
	}
	// A chain a quarter as long, for the memory comparison.
	small := max(n/4, 1)
	dir, err := project(files, small)
	if err != nil {
		return err
	}
	_, rssSmall, err = viaDecree(ctl, dir, small)
	dirs = append(dirs, dir)
	if err != nil {
		return err
	}
	b, d := median(bashS), median(decreeS)
	fmt.Printf("bash      n=%d seconds=%.3f\n", n, b)
	fmt.Printf("decree    n=%d seconds=%.3f maxrss_mb=%.1f\n", n, d, float64(rss)/1024)
	fmt.Printf("decree    n=%d maxrss_mb=%.1f (memory check: flat if close to the line above)\n", small, float64(rssSmall)/1024)
	fmt.Printf("overhead  files=%d queued=%d ms_per_message=%.2f ratio=%.1f load=%s\n", files, queued, (d-b)*1000/float64(n), d/b, benchproj.LoadAvg())
	if ralph {
		g := median(ralphS)
		fmt.Printf("ralph     files=%d n=%d seconds=%.3f ms_per_message=%.2f decree_ms_per_message=%.2f decree_over_ralph=%.2f load=%s\n",
			files, n, g, g*1000/float64(n), d*1000/float64(n), d/g, benchproj.LoadAvg())
	}
	return nil
}

// ralph selects the ralph-loop reference (-ralph).
var ralph bool

// editingRoutine is benchproj's routine that also appends a line to a
// tracked file, so that every message changes the tree.
var editingRoutine = strings.Replace(benchproj.Routine, "exit 0\n", "printf '%s\\n' \"$seq\" >> src/d00/f0000.txt\nexit 0\n", 1)

// viaRalph commits the tree (untimed), then runs the routine n times,
// each followed by git add -A && git commit -q, as a ralph loop does.
func viaRalph(dir string, n int) (float64, error) {
	home, err := os.MkdirTemp("", "decree-pipebench-home-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(home)
	env := append(os.Environ(), "HOME="+home, "XDG_CONFIG_HOME="+home, "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_AUTHOR_NAME=bench", "GIT_AUTHOR_EMAIL=bench@example.com", "GIT_COMMITTER_NAME=bench", "GIT_COMMITTER_EMAIL=bench@example.com")
	git := func(args ...string) error {
		cmd := exec.Command("git", args...)
		cmd.Dir, cmd.Env = dir, env
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("git %v: %v\n%s", args, err, out)
		}
		return nil
	}
	if err := git("init", "-q"); err != nil {
		return 0, err
	}
	if err := os.WriteFile(filepath.Join(dir, ".git", "info", "exclude"), []byte(".decree/\n"), 0o644); err != nil {
		return 0, err
	}
	if err := git("add", "-A"); err != nil {
		return 0, err
	}
	if err := git("commit", "-qm", "base"); err != nil {
		return 0, err
	}
	benchproj.Settle()
	script := filepath.Join(dir, ".decree", "routines", "chain.sh")
	chain := "2000010100000000"
	start := time.Now()
	for seq := 0; seq < n; seq++ {
		id := chain + "-" + strconv.Itoa(seq)
		loop := "bash " + script + " && git add -A && git commit -q -m step"
		cmd := exec.Command("bash", "-c", loop)
		cmd.Dir = dir
		cmd.Env = append(env, "chain="+chain, "seq="+strconv.Itoa(seq), "message_id="+id,
			"message_dir=.decree/runs/"+id, "message_file=.decree/runs/"+id+"/message.md", "spec_file=", "last="+strconv.Itoa(n-1))
		if out, err := cmd.CombinedOutput(); err != nil {
			return 0, fmt.Errorf("ralph loop step %d: %v\n%s", seq, err, out)
		}
	}
	return time.Since(start).Seconds(), nil
}

// queued is the number of messages of other chains in the inbox (-queued).
var queued int

// project creates a decree project with a tree of files and the bench
// routine, configured for a chain of n messages, with queued messages of
// other chains waiting in the inbox.
func project(files, n int) (string, error) {
	dir, err := benchproj.New("decree-pipebench-", files, n+10, "chain")
	if err != nil {
		return "", err
	}
	if ralph {
		if err := os.WriteFile(filepath.Join(dir, ".decree", "routines", "chain.sh"), []byte(editingRoutine), 0o755); err != nil {
			return "", err
		}
		// The ralph loop's first commit (git's index and objects for the
		// whole tree) is not timed; neither is decree's first checkpoint
		// of the tree (its object store and stat cache).
		cp, err := checkpoint.New(checkpoint.Options{ObjectsDir: layout.Path(dir, layout.Objects), CachePath: layout.Path(dir, layout.StatCache)})
		if err != nil {
			return "", err
		}
		if _, err := cp.Snapshot(context.Background(), dir); err != nil {
			return "", err
		}
	}
	return dir, benchproj.Queue(dir, queued, func(i int) string { return fmt.Sprintf("queued message %d\n", i) })
}

// viaBash runs the routine n times directly, as decree would (same
// environment variables, same follow-up file, filed away afterwards).
func viaBash(dir string, n int) (float64, error) {
	script := filepath.Join(dir, ".decree", "routines", "chain.sh")
	chain := "2000010100000000"
	filed := filepath.Join(dir, ".decree", "bench-bash-filed")
	if err := os.MkdirAll(filed, 0o755); err != nil {
		return 0, err
	}
	start := time.Now()
	for seq := 0; seq < n; seq++ {
		cmd := exec.Command("bash", script)
		cmd.Dir = dir
		id := chain + "-" + strconv.Itoa(seq)
		cmd.Env = append(os.Environ(), "chain="+chain, "seq="+strconv.Itoa(seq), "message_id="+id,
			"message_dir=.decree/runs/"+id, "message_file=.decree/runs/"+id+"/message.md", "spec_file=", "last="+strconv.Itoa(n-1))
		if out, err := cmd.CombinedOutput(); err != nil {
			return 0, fmt.Errorf("bash %s: %v\n%s", script, err, out)
		}
		// Filed away as decree files a processed message: renamed, not
		// removed (see run).
		name := fmt.Sprintf("%s-%d.md", chain, seq+1)
		if err := os.Rename(filepath.Join(dir, ".decree", "inbox", name), filepath.Join(filed, name)); err != nil && seq < n-1 {
			return 0, err
		}
	}
	return time.Since(start).Seconds(), nil
}

// viaDecree runs the chain with decreectl run and returns wall seconds and
// peak RSS in KiB.
func viaDecree(ctl, dir string, n int) (float64, int64, error) {
	cmd := exec.Command(ctl, "-C", dir, "run", "-q", "-m", "bench", "-p", "go", "-v", "last="+strconv.Itoa(n-1))
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "DECREE_CONTROLLER=")
	start := time.Now()
	out, err := cmd.CombinedOutput()
	secs := time.Since(start).Seconds()
	if err != nil {
		return 0, 0, fmt.Errorf("decreectl run: %v\n%s", err, tail(out))
	}
	done, _ := os.ReadDir(filepath.Join(dir, ".decree", "inbox", "done"))
	if len(done) != n {
		return 0, 0, fmt.Errorf("decreectl run finished %d messages, want %d\n%s", len(done), n, tail(out))
	}
	ru, _ := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	var rss int64
	if ru != nil {
		rss = ru.Maxrss
	}
	return secs, rss, nil
}

func tail(b []byte) []byte {
	if len(b) > 4000 {
		return b[len(b)-4000:]
	}
	return b
}

func median(xs []float64) float64 {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	return s[len(s)/2]
}
