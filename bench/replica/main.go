// Command replica-bench times bringing a worker's replica workspace up to
// date against `rsync -a` of the same trees, in the same run.
//
// It generates a tree (default 20,000 files, 300 MB: many small text files,
// some medium ones, a few large binary ones), serves it the way a
// controller does (controller/replica behind the real gRPC adapter, on a
// unix socket, contents from a checkpoint object store), and measures:
//
//	initial      Sync of an empty replica           vs  rsync -a src/ empty/
//	incremental  Sync after N changed files          vs  rsync -a src/ dst/
//
// Each row is the median of -reps runs; the page cache is warm for both
// sides (the source was just generated and snapshotted), dirty pages are
// flushed (sync) before each timed step, and the order of decree and
// rsync alternates between repetitions. The "incremental+checkpoint" row
// adds the controller's snapshot + publish after the changes to the sync:
// what a replica costs for a whole message, against rsync alone (which
// needs no checkpoint). Each row carries the load average.
//
//	go run ./bench/replica [-files 20000] [-mb 300] [-changed 10] [-reps 3] [-increps N] [-incprofile cpu.prof]
package main

import (
	"context"
	"flag"
	"fmt"
	"math/rand"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"sort"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/decreehq/decree/bench/internal/benchproj"
	"github.com/decreehq/decree/controller/lease"
	creplica "github.com/decreehq/decree/controller/replica"
	"github.com/decreehq/decree/controller/rpc"
	pauth "github.com/decreehq/decree/pkg/auth"
	"github.com/decreehq/decree/pkg/checkpoint"
	decreev1 "github.com/decreehq/decree/proto/decree/v1"
	wreplica "github.com/decreehq/decree/worker/replica"
)

type leases map[string]lease.AssignmentView

func (l leases) Active(token string) (lease.AssignmentView, error) {
	v, ok := l[token]
	if !ok {
		return v, lease.ErrUnknownLease
	}
	return v, nil
}

func main() {
	files := flag.Int("files", 20000, "files in the generated tree")
	mb := flag.Int("mb", 300, "total size of the generated tree in MB")
	changed := flag.Int("changed", 10, "files changed before the incremental sync")
	reps := flag.Int("reps", 3, "repetitions per measurement (the median is printed)")
	keep := flag.Bool("keep", false, "keep the temporary directory")
	base := flag.String("dir", "", "directory for the trees (default: the system temp dir; /dev/shm takes the disk out)")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile of the whole run to this file")
	incProfile := flag.String("incprofile", "", "write a CPU profile of the incremental rows only (checkpoint, publish, sync and rsync after the changes) to this file")
	incReps := flag.Int("increps", 0, "repetitions of the incremental rows (default: -reps)")
	flag.Parse()
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err == nil {
			pprof.StartCPUProfile(f)
			defer pprof.StopCPUProfile()
		}
	}
	if *incReps <= 0 {
		*incReps = *reps
	}
	if err := run(*base, *files, int64(*mb)<<20, *changed, *reps, *incReps, *incProfile, *keep); err != nil {
		fmt.Fprintln(os.Stderr, "replica-bench:", err)
		pprof.StopCPUProfile()
		os.Exit(1)
	}
}

func run(base string, files int, total int64, changed, reps, incReps int, incProfile string, keep bool) error {
	if _, err := exec.LookPath("rsync"); err != nil {
		return fmt.Errorf("rsync is needed as the reference: %w", err)
	}
	tmp, err := os.MkdirTemp(base, "decree-replica-bench-")
	if err != nil {
		return err
	}
	if !keep {
		defer os.RemoveAll(tmp)
	}
	src := filepath.Join(tmp, "src")
	n, bytes, err := gen(src, files, total)
	if err != nil {
		return err
	}
	fmt.Printf("tree: %d files, %.1f MB in %s\n", n, float64(bytes)/(1<<20), src)

	cp, err := checkpoint.New(checkpoint.Options{ObjectsDir: filepath.Join(tmp, "objects"), CachePath: filepath.Join(tmp, "statcache")})
	if err != nil {
		return err
	}
	ls := leases{}
	svc, err := creplica.New(creplica.Options{Root: src, Objects: cp.Store(), Leases: ls})
	if err != nil {
		return err
	}
	sock := filepath.Join(tmp, "bench.sock")
	lis, err := net.Listen("unix", sock)
	if err != nil {
		return err
	}
	srv := grpc.NewServer(pauth.MessageSizeServerOptions()...)
	decreev1.RegisterWorkerServiceServer(srv, rpc.NewWorkerServer(nil).WithReplica(svc))
	go srv.Serve(lis)
	defer srv.Stop()
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()), pauth.MessageSizeDialOption())
	if err != nil {
		return err
	}
	defer conn.Close()
	client := decreev1.NewWorkerServiceClient(conn)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// The controller's checkpointer watches the project while it serves
	// (checkpoint.Serve): its snapshots look at what changed. Its first
	// snapshot walks the tree and sets up the watches (untimed, with the
	// fresh tree's checkpoint below).
	go cp.Serve(ctx, src)
	for {
		if _, err := cp.Snapshot(ctx, src); err != nil {
			return err
		}
		if !cp.LastStats().Walked {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}

	var release func()
	publish := func() (time.Duration, error) {
		start := time.Now()
		m, err := cp.Snapshot(ctx, src)
		if err != nil {
			return 0, err
		}
		if release != nil {
			release()
		}
		var digest string
		digest, release, err = svc.Publish(m)
		ls["tok"] = lease.AssignmentView{MessageID: "bench-0", Attempt: 1, ManifestDigest: digest}
		return time.Since(start), err
	}
	d, err := publish()
	if err != nil {
		return err
	}
	fmt.Printf("controller checkpoint of the fresh tree (not part of the sync): %s\n\n", d.Round(time.Millisecond))

	var ours, theirs []time.Duration
	var rep *wreplica.Replica
	var rsyncDst string
	var last *wreplica.Synced
	for i := 0; i < reps; i++ {
		dst := filepath.Join(tmp, fmt.Sprintf("replica-%d", i))
		os.Mkdir(dst, 0o755)
		r, err := wreplica.Open(dst, wreplica.Options{})
		if err != nil {
			return err
		}
		rdst := filepath.Join(tmp, fmt.Sprintf("rsync-%d", i))
		var st *wreplica.Synced
		err = alternate(i, func() error {
			syscall.Sync()
			start := time.Now()
			st, err = r.Sync(ctx, client, "tok", ls["tok"].ManifestDigest)
			ours = append(ours, time.Since(start))
			return err
		}, func() error {
			syscall.Sync()
			d, err := rsync(src, rdst)
			theirs = append(theirs, d)
			return err
		})
		if err != nil {
			return err
		}
		if err := check(ctx, r, st); err != nil {
			return err
		}
		if i < reps-1 {
			os.RemoveAll(dst)
			os.RemoveAll(rdst)
		}
		rep, rsyncDst, last = r, rdst, st
	}
	fmt.Printf("%-12s %10s %10s %7s   %s\n", "", "decree", "rsync -a", "ratio", "detail")
	row("initial", ours, theirs, fmt.Sprintf("%d blobs, %.1f MB fetched", last.FetchedBlobs, float64(last.FetchedBytes)/(1<<20)))

	ours, theirs = nil, nil
	var pubs, whole []time.Duration
	if incProfile != "" {
		f, err := os.Create(incProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return fmt.Errorf("-incprofile: %w (not with -cpuprofile)", err)
		}
	}
	for i := 0; i < incReps; i++ {
		if err := mutate(src, changed, int64(i)); err != nil {
			return err
		}
		d, err := publish()
		if err != nil {
			return err
		}
		pubs = append(pubs, d)
		var st *wreplica.Synced
		err = alternate(i, func() error {
			syscall.Sync()
			start := time.Now()
			st, err = rep.Sync(ctx, client, "tok", ls["tok"].ManifestDigest)
			ours = append(ours, time.Since(start))
			whole = append(whole, d+time.Since(start))
			return err
		}, func() error {
			syscall.Sync()
			d, err := rsync(src, rsyncDst)
			theirs = append(theirs, d)
			return err
		})
		if err != nil {
			return err
		}
		if err := check(ctx, rep, st); err != nil {
			return err
		}
		last = st
	}
	if incProfile != "" {
		pprof.StopCPUProfile()
	}
	row("incremental", ours, theirs, fmt.Sprintf("%d changed files: %d blobs, %.1f KB fetched", changed, last.FetchedBlobs, float64(last.FetchedBytes)/1024))
	row("incr+ckpt", whole, theirs, "the controller's checkpoint + publish, then the sync: a whole message")
	fmt.Printf("\ncontroller checkpoint after the changes (not part of the sync): median %s\n", median(pubs).Round(time.Millisecond))
	fmt.Println("ratio = decree / rsync; below 1.0 means decree is faster. Goals: initial <= 1.5, incremental <= 1.0, incr+ckpt <= 1.5.")
	return nil
}

// alternate runs a then b on even repetitions and b then a on odd ones,
// so neither side always inherits the other's dirty pages.
func alternate(i int, a, b func() error) error {
	if i%2 == 1 {
		a, b = b, a
	}
	if err := a(); err != nil {
		return err
	}
	return b()
}

func row(name string, ours, theirs []time.Duration, detail string) {
	a, b := median(ours), median(theirs)
	fmt.Printf("%-12s %10s %10s %7.2f   %s (load %s)\n", name, a.Round(time.Millisecond), b.Round(time.Millisecond), float64(a)/float64(b), detail, benchproj.LoadAvg())
}

func median(ds []time.Duration) time.Duration {
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}

// check makes sure the replica matches what the sync promised.
func check(ctx context.Context, r *wreplica.Replica, st *wreplica.Synced) error {
	got, err := r.Scan(ctx)
	if err != nil {
		return err
	}
	if !got.Equal(st.Manifest) {
		return fmt.Errorf("the replica does not match the controller after the sync: %d path(s) differ", len(checkpoint.Compare(st.Manifest, got)))
	}
	return nil
}

func rsync(src, dst string) (time.Duration, error) {
	start := time.Now()
	out, err := exec.Command("rsync", "-a", src+"/", dst+"/").CombinedOutput()
	if err != nil {
		return 0, fmt.Errorf("rsync: %v\n%s", err, out)
	}
	return time.Since(start), nil
}

// gen writes a tree shaped like a source repository: 0.5% large binary
// files with 45% of the bytes, 5% medium text files with 25%, and small
// text files with the rest, 20 files per directory.
func gen(dir string, files int, total int64) (int, int64, error) {
	r := rand.New(rand.NewSource(42))
	nBig, nMed := files/200, files/20
	bigSize := int(total * 45 / 100 / int64(max(nBig, 1)))
	medSize := int(total * 25 / 100 / int64(max(nMed, 1)))
	smallSize := int(total * 30 / 100 / int64(max(files-nBig-nMed, 1)))
	var written int64
	for i := 0; i < files; i++ {
		d := filepath.Join(dir, fmt.Sprintf("pkg%02d", i/1000), fmt.Sprintf("mod%02d", (i/20)%50))
		if i%20 == 0 {
			if err := os.MkdirAll(d, 0o755); err != nil {
				return 0, 0, err
			}
		}
		name := fmt.Sprintf("file%05d.go", i)
		var data []byte
		switch {
		case i%200 == 11 && nBig > 0:
			data = make([]byte, bigSize/2+r.Intn(bigSize))
			r.Read(data)
			name = fmt.Sprintf("blob%05d.bin", i)
		case i%20 == 5:
			data = text(r, medSize/2+r.Intn(medSize))
		default:
			data = text(r, smallSize/2+r.Intn(smallSize))
		}
		if err := os.WriteFile(filepath.Join(d, name), data, 0o644); err != nil {
			return 0, 0, err
		}
		written += int64(len(data))
	}
	return files, written, nil
}

var words = []string{"func", "return", "err", "if", "nil", "for", "range", "ctx", "string", "int", "package", "import", "type", "struct", "var", "const", "go", "defer", "select", "case"}

func text(r *rand.Rand, n int) []byte {
	b := make([]byte, 0, n+16)
	for len(b) < n {
		b = append(b, words[r.Intn(len(words))]...)
		if r.Intn(8) == 0 {
			b = append(b, '\n')
		} else {
			b = append(b, ' ')
		}
	}
	return b[:n]
}

// mutate changes n small text files (a line appended).
func mutate(root string, n int, seed int64) error {
	var paths []string
	filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() && filepath.Ext(p) == ".go" {
			paths = append(paths, p)
		}
		return nil
	})
	r := rand.New(rand.NewSource(100 + seed))
	for i := 0; i < n; i++ {
		p := paths[r.Intn(len(paths))]
		f, err := os.OpenFile(p, os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			return err
		}
		fmt.Fprintf(f, "\n// changed %d %d\n", seed, i)
		f.Close()
	}
	return nil
}
