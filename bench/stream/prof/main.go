// Command stream-prof runs `decreectl run -q` in this process (cli.Main) on
// a project whose routine prints 200 MB of formatted lines, under the CPU
// profiler, so the profile shows where decreectl's embedded controller and
// worker spend their time (bash, awk and the supervisor are other processes:
// see `strace -c -f`).
//
//	stream-prof -cpuprofile cpu.pprof [-runs 3] [-quiet=false]
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/pprof"
	"time"

	"github.com/decreehq/decree/cmd/decreectl/cli"
)

const routine = `awk 'BEGIN { for (i = 0; i < 3495253; i++) printf "%08d routine output line, sixty bytes long........\n", i }'`

func main() {
	out := flag.String("cpuprofile", "", "write the CPU profile here")
	runs := flag.Int("runs", 3, "runs of decreectl run")
	quiet := flag.Bool("quiet", true, "decreectl run -q (as bench/stream does); false streams the output to stdout")
	flag.Parse()
	if err := run(*out, *runs, *quiet); err != nil {
		fmt.Fprintln(os.Stderr, "stream-prof:", err)
		os.Exit(1)
	}
}

func mkproj(dir string) error {
	if err := os.MkdirAll(filepath.Join(dir, "src"), 0o755); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Join(dir, ".decree", "routines"), 0o755); err != nil {
		return err
	}
	for i := 1; i <= 100; i++ {
		if err := os.WriteFile(filepath.Join(dir, "src", fmt.Sprintf("f%d.txt", i)), []byte(fmt.Sprintf("file %d\n", i)), 0o644); err != nil {
			return err
		}
	}
	if err := os.WriteFile(filepath.Join(dir, ".decree", "config.yml"), []byte("commands:\n  router: \"\"\nmax_retries: 1\ndefault_routine: loud\n"), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, ".decree", "routines", "loud.sh"), []byte("#!/usr/bin/env bash\n"+routine+"\n"), 0o644)
}

func run(out string, runs int, quiet bool) error {
	tmp, err := os.MkdirTemp("", "decree-streamprof-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	os.Setenv("DECREE_CONTROLLER", "")
	if out != "" {
		f, err := os.Create(out)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	var stdout io.Writer = io.Discard
	args := []string{"run", "-m", "stream"}
	if quiet {
		args = append(args, "-q")
	} else {
		stdout = os.Stdout
	}
	for i := range runs {
		dir := filepath.Join(tmp, fmt.Sprintf("p%d", i))
		if err := mkproj(dir); err != nil {
			return err
		}
		start := time.Now()
		if code := cli.Main(context.Background(), append([]string{"-C", dir}, args...), nil, stdout, io.Discard); code != 0 {
			return fmt.Errorf("decreectl run exited %d", code)
		}
		fmt.Fprintf(os.Stderr, "run %d: %.3f s\n", i+1, time.Since(start).Seconds())
	}
	return nil
}
