// Command checkpoint-bench generates a large project tree and times decree's
// checkpoints on it; run.sh drives it and times git on the same tree.
//
//	checkpoint-bench gen DIR [FILES] [MB]
//	checkpoint-bench snapshot ROOT STATE [-nosync]       (writes STATE/manifest.json)
//	checkpoint-bench status ROOT STATE                   (snapshot only, like git status)
//	checkpoint-bench mutate ROOT N
//	checkpoint-bench diff ROOT STATE [-nosync]           (reads STATE/manifest.json)
//	checkpoint-bench genbig FILE MB                      (one random binary file)
//	checkpoint-bench poke FILE                           (16 bytes changed in place, mid-file)
//
// CKBENCH_CPUPROFILE=FILE writes a CPU profile of the command.
//
// Each timed command prints one line: "<command> seconds=<s> maxrss_mb=<m> ...".
package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"runtime/pprof"
	"sort"
	"strconv"
	"syscall"
	"time"

	"github.com/decreehq/decree/pkg/checkpoint"
)

func main() {
	if len(os.Args) < 3 {
		fmt.Fprintln(os.Stderr, "usage: checkpoint-bench gen|snapshot|mutate|diff ...")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "gen":
		files, mb := 20000, 300
		if len(os.Args) > 3 {
			files, _ = strconv.Atoi(os.Args[3])
		}
		if len(os.Args) > 4 {
			mb, _ = strconv.Atoi(os.Args[4])
		}
		err = gen(os.Args[2], files, int64(mb)<<20)
	case "snapshot", "diff", "status":
		err = timed(os.Args[1], os.Args[2], os.Args[3], len(os.Args) > 4 && os.Args[4] == "-nosync")
	case "served":
		err = served(os.Args[2], os.Args[3])
	case "genbig":
		mb, _ := strconv.Atoi(os.Args[3])
		err = genBig(os.Args[2], int64(mb)<<20)
	case "poke":
		err = poke(os.Args[2])
	case "mutate":
		n, _ := strconv.Atoi(os.Args[3])
		err = mutate(os.Args[2], n)
	default:
		err = fmt.Errorf("unknown command %q", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "checkpoint-bench:", err)
		os.Exit(1)
	}
}

func maxRSSMB() float64 {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return float64(ru.Maxrss) / 1024
}

func timed(cmd, root, state string, noSync bool) error {
	// CKBENCH_CPUPROFILE=FILE profiles the command (a gap explained by a
	// profile, as the README's table asks).
	if pf := os.Getenv("CKBENCH_CPUPROFILE"); pf != "" {
		f, err := os.Create(pf)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	cp, err := checkpoint.New(checkpoint.Options{
		ObjectsDir: filepath.Join(state, "objects"),
		CachePath:  filepath.Join(state, "statcache"),
		NoSync:     noSync,
	})
	if err != nil {
		return err
	}
	ctx := context.Background()
	start := time.Now()
	var extra string
	switch cmd {
	case "status":
		if _, err := cp.Snapshot(ctx, root); err != nil {
			return err
		}
	case "snapshot":
		m, err := cp.Snapshot(ctx, root)
		if err != nil {
			return err
		}
		if err := checkpoint.WriteManifest(filepath.Join(state, "manifest.json"), m); err != nil {
			return err
		}
	case "diff":
		before, err := checkpoint.ReadManifest(filepath.Join(state, "manifest.json"))
		if err != nil {
			return err
		}
		// Streamed to the file, as the controller writes changes.diff.
		f, err := os.Create(filepath.Join(state, "changes.diff"))
		if err != nil {
			return err
		}
		defer f.Close()
		if _, err := cp.DiffTo(ctx, root, before, f); err != nil {
			return err
		}
		if !noSync {
			if err := f.Sync(); err != nil {
				return err
			}
		}
		fi, err := f.Stat()
		if err != nil {
			return err
		}
		extra = fmt.Sprintf(" diff_bytes=%d", fi.Size())
	}
	el := time.Since(start)
	st := cp.LastStats()
	fmt.Printf("%s seconds=%.3f maxrss_mb=%.1f files=%d hashed=%d hashed_mb=%.1f cache_hits=%d stored=%d%s\n",
		cmd, el.Seconds(), maxRSSMB(), st.Files, st.Hashed, float64(st.HashedBytes)/(1<<20), st.CacheHits, st.Stored, extra)
	return nil
}

var words = []string{"func", "return", "if", "err", "nil", "for", "range", "package", "import", "type",
	"struct", "string", "int", "value", "index", "count", "result", "context", "error", "{", "}", "(", ")", ":=", "=", "+"}

func textContent(r *rand.Rand, size int) []byte {
	b := make([]byte, 0, size+80)
	for len(b) < size {
		n := 3 + r.Intn(9)
		b = append(b, "\t"[:r.Intn(2)]...)
		for i := 0; i < n; i++ {
			b = append(b, words[r.Intn(len(words))]...)
			b = append(b, ' ')
		}
		b = append(b, '\n')
	}
	return b
}

// gen writes files (mostly small text, some larger binary) totalling about
// total bytes, twenty to a directory, three levels deep.
func gen(dir string, files int, total int64) error {
	r := rand.New(rand.NewSource(1))
	nBig := files / 200 // 0.5% large binary files carry 45% of the bytes
	nMed := files / 20  // 5% medium text files carry 25%
	bigSize := int(total * 45 / 100 / int64(max(nBig, 1)))
	medSize := int(total * 25 / 100 / int64(max(nMed, 1)))
	smallSize := int(total * 30 / 100 / int64(files-nBig-nMed))
	var written int64
	for i := 0; i < files; i++ {
		d := filepath.Join(dir, fmt.Sprintf("d%02d", i/1000), fmt.Sprintf("e%02d", (i/20)%50))
		if i%20 == 0 {
			if err := os.MkdirAll(d, 0o755); err != nil {
				return err
			}
		}
		var data []byte
		name := fmt.Sprintf("f%05d.go", i)
		switch {
		case i%200 == 7 && nBig > 0:
			data = make([]byte, bigSize/2+r.Intn(bigSize))
			r.Read(data)
			name = fmt.Sprintf("b%05d.bin", i)
		case i%20 == 3:
			data = textContent(r, medSize/2+r.Intn(medSize))
		default:
			data = textContent(r, smallSize/2+r.Intn(smallSize))
		}
		if err := os.WriteFile(filepath.Join(d, name), data, 0o644); err != nil {
			return err
		}
		written += int64(len(data))
	}
	fmt.Printf("generated files=%d mb=%.1f\n", files, float64(written)/(1<<20))
	return nil
}

// genBig writes one file of size random bytes.
func genBig(path string, size int64) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	r := rand.New(rand.NewSource(2))
	buf := make([]byte, 1<<20)
	for size > 0 {
		n := min(size, int64(len(buf)))
		r.Read(buf[:n])
		if _, err := f.Write(buf[:n]); err != nil {
			f.Close()
			return err
		}
		size -= n
	}
	return f.Close()
}

// poke overwrites 16 bytes in the middle of the file, in place.
func poke(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	b := make([]byte, 16)
	rand.New(rand.NewSource(time.Now().UnixNano())).Read(b)
	_, err = f.WriteAt(b, fi.Size()/2)
	return err
}

// mutate edits n small text files in place (a line changed, one appended).
func mutate(root string, n int) error {
	r := rand.New(rand.NewSource(time.Now().UnixNano()))
	done := 0
	for done < n {
		i := r.Intn(20000)
		p := filepath.Join(root, fmt.Sprintf("d%02d", i/1000), fmt.Sprintf("e%02d", (i/20)%50), fmt.Sprintf("f%05d.go", i))
		data, err := os.ReadFile(p)
		if err != nil {
			continue // a binary file or beyond the tree
		}
		data = append(data, []byte(fmt.Sprintf("// edited %d\n", r.Int()))...)
		if len(data) > 100 {
			copy(data[50:], "CHANGED")
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			return err
		}
		done++
	}
	return nil
}

// served measures what a controller that serves the project pays: the
// checkpointer watches the tree (checkpoint.Serve), its first snapshot
// (the walk that sets up the watches) is untimed, then it times 15
// snapshots of the unchanged tree and 3 rounds of 10 edits followed by a
// snapshot + diff (DiffTo into a file, as the controller writes
// changes.diff), each round's edits made before its clock starts. It
// prints the medians.
func served(root, state string) error {
	cp, err := checkpoint.New(checkpoint.Options{ObjectsDir: filepath.Join(state, "objects"), CachePath: filepath.Join(state, "statcache")})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go cp.Serve(ctx, root)
	var before *checkpoint.Manifest
	for before == nil || cp.LastStats().Walked { // until Serve is registered and primed
		if before, err = cp.Snapshot(ctx, root); err != nil {
			return err
		}
		time.Sleep(10 * time.Millisecond)
	}
	med := func(xs []float64) float64 { sort.Float64s(xs); return xs[len(xs)/2] }
	var warm []float64
	for i := 0; i < 15; i++ {
		start := time.Now()
		if _, err := cp.Snapshot(ctx, root); err != nil {
			return err
		}
		warm = append(warm, time.Since(start).Seconds())
		if cp.LastStats().Walked {
			return errors.New("a served snapshot walked the tree")
		}
	}
	var change []float64
	for i := 0; i < 3; i++ {
		if err := mutate(root, 10); err != nil {
			return err
		}
		f, err := os.Create(filepath.Join(state, "changes.diff"))
		if err != nil {
			return err
		}
		start := time.Now()
		after, err := cp.DiffTo(ctx, root, before, f)
		if err == nil {
			err = f.Sync()
		}
		change = append(change, time.Since(start).Seconds())
		f.Close()
		if err != nil {
			return err
		}
		before = after
	}
	fmt.Printf("served warm_seconds=%.6f change_seconds=%.6f maxrss_mb=%.1f files=%d\n", med(warm), med(change), maxRSSMB(), len(before.Files))
	return nil
}
