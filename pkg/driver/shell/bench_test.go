//go:build linux

package shell

import (
	"context"
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
	"golang.org/x/sys/unix"
)

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

// streamCases are the routines of BenchmarkStream200MB, each printing about
// 200 MB of 60-byte lines.
//   - lines: awk formats every line, as a build or test log is produced: the
//     output costs the routine something to make.
//   - copy: `yes | head` copies a ready line; the output costs nothing to
//     make, so any capture shows at its full price. No reader of a pipe can
//     reach the /dev/null reference here: splice_floor (the pipe spliced to
//     /dev/null inside the kernel, never read) is measured to show the bound.
var streamCases = []struct{ name, script string }{
	{"lines", "awk 'BEGIN { for (i = 0; i < 3495253; i++) printf \"%08d routine output line, sixty bytes long........\\n\", i }'\n"},
	{"copy", "yes 'a line of routine output, about sixty bytes long......' | head -c 209715200\n"},
}

// BenchmarkStream200MB streams about 200 MB of routine output through the
// shell driver and reports, per routine, the time against `bash ROUTINE.sh >
// /dev/null` (goal: at most 1.3), against `bash ROUTINE.sh | cat >
// /dev/null`, and against the splice floor, all measured in the same run,
// plus the peak live heap during the driver runs.
//
//	go test -run '^$' -bench Stream200MB -benchtime 3x ./pkg/driver/shell/
func BenchmarkStream200MB(b *testing.B) {
	bash := drivertest.RequireTool(b, "bash")
	for _, sc := range streamCases {
		b.Run(sc.name, func(b *testing.B) { benchStream(b, bash, sc.script) })
	}
}

func benchStream(b *testing.B, bash, body string) {
	dir := b.TempDir()
	script := filepath.Join(dir, "loud.sh")
	if err := os.WriteFile(script, []byte(body), 0o644); err != nil {
		b.Fatal(err)
	}
	want := outputSize(b, bash, script)
	var refNull, refCat, floor, sink, events time.Duration
	var peakSink, peakEvents uint64
	b.SetBytes(want)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		devnull, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
		if err != nil {
			b.Fatal(err)
		}
		cmd := exec.Command(bash, script)
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

		t0 = time.Now()
		if n := spliceToNull(b, bash, script); n != want {
			b.Fatalf("splice floor moved %d bytes, want %d", n, want)
		}
		floor += time.Since(t0)

		hp := startHeapPeak()
		t0 = time.Now()
		var cw countWriter
		res, err := driver.Run(context.Background(), New(), driver.TaskConfig{Routine: "loud", Path: script, Workdir: dir}, &cw)
		sink += time.Since(t0)
		peakSink = max(peakSink, hp.done())
		if err != nil || !res.Success() || cw.n != want {
			b.Fatalf("sink run: %+v %v, %d bytes, want %d", res, err, cw.n, want)
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
		if n != want {
			b.Fatalf("events run got %d bytes, want %d", n, want)
		}
	}
	b.StopTimer()
	mbps := func(d time.Duration) float64 { return float64(want) * float64(b.N) / d.Seconds() / (1 << 20) }
	b.ReportMetric(mbps(refNull), "ref_devnull_MB/s")
	b.ReportMetric(mbps(refCat), "ref_pipe_cat_MB/s")
	b.ReportMetric(mbps(floor), "splice_floor_MB/s")
	b.ReportMetric(mbps(sink), "sink_MB/s")
	b.ReportMetric(mbps(events), "events_MB/s")
	b.ReportMetric(sink.Seconds()/refNull.Seconds(), "sink_time/ref_devnull")
	b.ReportMetric(events.Seconds()/refNull.Seconds(), "events_time/ref_devnull")
	b.ReportMetric(floor.Seconds()/refNull.Seconds(), "floor_time/ref_devnull")
	b.ReportMetric(sink.Seconds()/refCat.Seconds(), "sink_time/ref_pipe_cat")
	b.ReportMetric(float64(peakSink)/(1<<20), "peak_heap_sink_MiB")
	b.ReportMetric(float64(peakEvents)/(1<<20), "peak_heap_events_MiB")
}

// outputSize runs the script once to learn how many bytes it prints.
func outputSize(b *testing.B, bash, script string) int64 {
	var cw countWriter
	cmd := exec.Command(bash, script)
	cmd.Stdout = &cw
	if err := cmd.Run(); err != nil {
		b.Fatal(err)
	}
	if cw.n < 100<<20 {
		b.Fatalf("benchmark routine printed only %d bytes", cw.n)
	}
	return cw.n
}

// spliceToNull runs the script with its output on a pipe as large as the
// driver's and moves the pipe's pages to /dev/null with splice(2): the
// least any pipe capture can cost, since the bytes are never copied out.
func spliceToNull(b *testing.B, bash, script string) int64 {
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		b.Fatal(err)
	}
	_, _ = unix.FcntlInt(uintptr(p[1]), unix.F_SETPIPE_SZ, 1<<20)
	pw := os.NewFile(uintptr(p[1]), "pipe")
	cmd := exec.Command(bash, script)
	cmd.Stdout = pw
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	pw.Close()
	null, err := unix.Open(os.DevNull, unix.O_WRONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		b.Fatal(err)
	}
	var total int64
	for {
		n, err := unix.Splice(p[0], nil, null, nil, 1<<20, 0)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			b.Fatalf("splice: %v", err)
		}
		if n == 0 {
			break
		}
		total += n
	}
	unix.Close(p[0])
	unix.Close(null)
	if err := cmd.Wait(); err != nil {
		b.Fatal(err)
	}
	return total
}
