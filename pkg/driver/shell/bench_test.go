package shell

import (
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/decreehq/decree/pkg/driver"
	"github.com/decreehq/decree/pkg/driver/internal/drivertest"
)

const streamBytes = 200 << 20

// heapPeak samples the live heap until stopped and returns the maximum.
type heapPeak struct {
	peak atomic.Uint64
	stop chan struct{}
	wg   sync.WaitGroup
}

func startHeapPeak() *heapPeak {
	runtime.GC()
	h := &heapPeak{stop: make(chan struct{})}
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		var ms runtime.MemStats
		t := time.NewTicker(5 * time.Millisecond)
		defer t.Stop()
		for {
			runtime.ReadMemStats(&ms)
			if ms.HeapInuse > h.peak.Load() {
				h.peak.Store(ms.HeapInuse)
			}
			select {
			case <-h.stop:
				return
			case <-t.C:
			}
		}
	}()
	return h
}

func (h *heapPeak) done() uint64 { close(h.stop); h.wg.Wait(); return h.peak.Load() }

// countWriter counts and discards.
type countWriter struct{ n int64 }

func (w *countWriter) Write(p []byte) (int, error) { w.n += int64(len(p)); return len(p), nil }

// BenchmarkStream200MB streams 200 MB of routine output through the shell
// driver and reports throughput against `bash ROUTINE.sh > /dev/null` and
// `bash ROUTINE.sh | cat > /dev/null` measured in the same run, plus the
// peak live heap during the driver runs.
//
//	go test -run '^$' -bench Stream200MB -benchtime 3x ./pkg/driver/shell/
func BenchmarkStream200MB(b *testing.B) {
	bash := drivertest.RequireTool(b, "bash")
	dir := b.TempDir()
	script := filepath.Join(dir, "loud.sh")
	// yes | head: a text stream written in pipe-sized pieces, like a chatty
	// build log, 200 MB in total.
	if err := os.WriteFile(script, []byte("yes 'a line of routine output, about sixty bytes long......' | head -c 209715200\n"), 0o644); err != nil {
		b.Fatal(err)
	}
	var refNull, refCat, sink, events time.Duration
	var peakSink, peakEvents uint64
	b.SetBytes(streamBytes)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		cmd := exec.Command(bash, script)
		devnull, _ := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
		cmd.Stdout = devnull
		if err := cmd.Run(); err != nil {
			b.Fatal(err)
		}
		devnull.Close()
		refNull += time.Since(t0)

		t0 = time.Now()
		if err := exec.Command(bash, "-c", "bash "+script+" | cat > /dev/null").Run(); err != nil {
			b.Fatal(err)
		}
		refCat += time.Since(t0)

		hp := startHeapPeak()
		t0 = time.Now()
		var cw countWriter
		res, err := driver.Run(context.Background(), New(), driver.TaskConfig{Routine: "loud", Path: script, Workdir: dir}, &cw)
		sink += time.Since(t0)
		peakSink = max(peakSink, hp.done())
		if err != nil || !res.Success() || cw.n != streamBytes {
			b.Fatalf("sink run: %+v %v, %d bytes", res, err, cw.n)
		}

		hp = startHeapPeak()
		t0 = time.Now()
		h, err := New().Start(context.Background(), driver.TaskConfig{Routine: "loud", Path: script, Workdir: dir})
		if err != nil {
			b.Fatal(err)
		}
		var n int64
		for ev := range h.Events() {
			n += int64(len(ev.Data))
		}
		events += time.Since(t0)
		peakEvents = max(peakEvents, hp.done())
		if n != streamBytes {
			b.Fatalf("events run got %d bytes", n)
		}
	}
	b.StopTimer()
	mbps := func(d time.Duration) float64 { return float64(streamBytes) * float64(b.N) / d.Seconds() / (1 << 20) }
	b.ReportMetric(mbps(refNull), "ref_devnull_MB/s")
	b.ReportMetric(mbps(refCat), "ref_pipe_cat_MB/s")
	b.ReportMetric(mbps(sink), "sink_MB/s")
	b.ReportMetric(mbps(events), "events_MB/s")
	b.ReportMetric(sink.Seconds()/refNull.Seconds(), "sink_time/ref_devnull")
	b.ReportMetric(events.Seconds()/refNull.Seconds(), "events_time/ref_devnull")
	b.ReportMetric(sink.Seconds()/refCat.Seconds(), "sink_time/ref_pipe_cat")
	b.ReportMetric(float64(peakSink)/(1<<20), "peak_heap_sink_MiB")
	b.ReportMetric(float64(peakEvents)/(1<<20), "peak_heap_events_MiB")
	_ = io.Discard
}
