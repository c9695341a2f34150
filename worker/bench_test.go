package worker_test

import (
	"fmt"
	"github.com/decreehq/decree/internal/testtool"
	"io"
	"log/slog"
	"os/exec"
	"runtime"
	"runtime/metrics"
	"sync/atomic"
	"testing"
	"time"

	"github.com/decreehq/decree/worker"
)

type heapSample struct{ inuse, live uint64 }

func readHeap() heapSample {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	return heapSample{inuse: m.HeapInuse, live: s[0].Value.Uint64()}
}

// heapPeak samples the heap until stop is closed and returns the peaks of
// the heap in use (live data plus garbage not yet collected) and of the
// live heap measured by the last GC.
func heapPeak(stop <-chan struct{}) <-chan heapSample {
	out := make(chan heapSample, 1)
	go func() {
		var peak heapSample
		t := time.NewTicker(2 * time.Millisecond)
		defer t.Stop()
		for {
			h := readHeap()
			peak.inuse = max(peak.inuse, h.inuse)
			peak.live = max(peak.live, h.live)
			select {
			case <-stop:
				out <- peak
				return
			case <-t.C:
			}
		}
	}()
	return out
}

// BenchmarkRoutineOutput streams 10 MiB and 100 MiB of routine output
// through a worker to an in-process controller double over a unix socket.
// It reports the peak heap growth, which must not grow with the output (the
// 10 MiB run is the reference for that), and the time relative to reading
// the same command's output directly from a pipe (measured in the same
// run).
func BenchmarkRoutineOutput(b *testing.B) {
	for _, size := range []int{10 << 20, 100 << 20} {
		b.Run(fmt.Sprintf("%dMiB", size>>20), func(b *testing.B) { benchOutput(b, size) })
	}
}

func benchOutput(b *testing.B, benchOutput int) {
	testtool.Require(b, "bash")
	testtool.Require(b, "head")
	script := fmt.Sprintf("head -c %d /dev/zero", benchOutput)
	ws := workspace(b, map[string]string{"big": script})
	fake := newFakeController()
	fake.keepData = false // the double keeps only size and hash
	startServer(b, sockOf(ws), fake)
	runWorker(b, worker.Options{Workspace: ws, Logger: slog.New(slog.DiscardHandler)})

	// Reference: the same bytes read straight from the process's pipe.
	refStart := time.Now()
	cmd := exec.Command("bash", "-c", script)
	cmd.Stdout = io.Discard
	if err := cmd.Run(); err != nil {
		b.Fatal(err)
	}
	ref := time.Since(refStart)

	runtime.GC()
	base := readHeap()
	stop := make(chan struct{})
	peakC := heapPeak(stop)
	var seq atomic.Int64
	b.SetBytes(int64(benchOutput))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		tok := fmt.Sprintf("bench-%d", seq.Add(1))
		fake.assign(routineAssignment(tok, "big"))
		c := waitCompletion(b, fake, 5*time.Minute)
		if c.GetLogSizes()["routine"] != uint64(benchOutput) || c.GetStatus().GetExitCode() != 0 {
			b.Fatalf("completion %v, want exit 0 and %d log bytes", c, benchOutput)
		}
	}
	b.StopTimer()
	close(stop)
	peak := <-peakC
	perOp := b.Elapsed().Seconds() / float64(b.N)
	b.ReportMetric((float64(peak.inuse)-float64(base.inuse))/(1<<20), "peak-heap-inuse-growth-MiB")
	b.ReportMetric((float64(peak.live)-float64(base.live))/(1<<20), "peak-live-heap-growth-MiB")
	b.ReportMetric(perOp/ref.Seconds(), "time/direct-pipe")
	b.ReportMetric(ref.Seconds()*1000, "direct-pipe-ms")
}
