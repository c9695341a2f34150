package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"runtime/trace"
	"strconv"
	"time"

	"github.com/decreehq/decree/cmd/decreectl/cli"
)

// profile runs the chain once through cli.Main in this process with CPU,
// block and mutex profiling and the execution tracer on, writing the
// profiles and trace.out into out (`go tool trace -pprof=syscall
// trace.out` shows where the pipeline waits on the file system).
func profile(out string, n, files int) error {
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	dir, err := project(files, n)
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	f, err := os.Create(filepath.Join(out, "cpu.pprof"))
	if err != nil {
		return err
	}
	defer f.Close()
	runtime.SetBlockProfileRate(int(time.Millisecond))
	runtime.SetMutexProfileFraction(10)
	if err := pprof.StartCPUProfile(f); err != nil {
		return err
	}
	tf, err := os.Create(filepath.Join(out, "trace.out"))
	if err != nil {
		return err
	}
	defer tf.Close()
	if err := trace.Start(tf); err != nil {
		return err
	}
	start := time.Now()
	code := cli.Main(context.Background(), []string{"-C", dir, "run", "-q", "-m", "bench", "-p", "go", "-v", "last=" + strconv.Itoa(n-1)},
		nil, io.Discard, io.Discard)
	secs := time.Since(start).Seconds()
	trace.Stop()
	pprof.StopCPUProfile()
	for _, name := range []string{"block", "mutex"} {
		pf, err := os.Create(filepath.Join(out, name+".pprof"))
		if err != nil {
			return err
		}
		_ = pprof.Lookup(name).WriteTo(pf, 0)
		pf.Close()
	}
	if code != 0 {
		return fmt.Errorf("decreectl run exited %d", code)
	}
	fmt.Printf("in-process n=%d seconds=%.3f ms_per_message=%.2f (profiles in %s)\n", n, secs, secs*1000/float64(n), out)
	return nil
}
