package e2e

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/decreehq/decree/internal/testtool"
	"github.com/decreehq/decree/pkg/auth"
	decreev1 "github.com/decreehq/decree/proto/decree/v1"
)

// bodyGoalKiB is issue #12's goal: controller, worker and decreectl under
// 100 MB of peak RSS whatever the size of a message.
const bodyGoalKiB = 100 << 10

// TestLargeBodyMemory sends a 60 MB message through real separate
// processes (decree-controller, a decree-worker, the decreectl binary) and
// checks that the routine sees the body byte for byte and that no process
// peaked at 100 MB or more (VmHWM of the controller and the worker from
// /proc; decreectl's peak from wait4). Once with a worker in the
// controller's tree (in place), once with a worker in a replica workspace,
// which fetches the large message.md with GetRunFile, and once with
// decreectl alone (its embedded controller and worker). The body is then
// read back through the API: GetMessage leaves it out, GetMessageBody
// streams it.
func TestLargeBodyMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("moves 60 MB through three processes")
	}
	for _, mode := range []string{"in-place", "replica", "embedded"} {
		t.Run(mode, func(t *testing.T) { largeBodyMemory(t, mode) })
	}
}

func largeBodyMemory(t *testing.T, mode string) {
	p := newProject(t, binary, baseConfig)
	p.routine("develop", "", `wc -c < "$message_file" > message-size.txt
sha256sum < "$message_file" | cut -d' ' -f1 > message-sha.txt`)
	bodyPath := filepath.Join(t.TempDir(), "body.md")
	const size = 60 << 20
	bodySum := writeRandomText(t, bodyPath, size)

	type peak struct {
		name string
		kib  func() int
	}
	var peaks []peak
	if mode != "embedded" {
		c := startController(t, p)
		ws := p.dir
		if mode == "replica" {
			ws = t.TempDir()
		}
		w := start(t, ws, "decree-worker", "--controller", "unix://"+p.path(".decree/decree.sock"), "--workspace", ws, "--id", "body-worker")
		peaks = append(peaks, peak{"decree-controller", func() int { return testtool.ProcStatusKiB(t, c.Cmd.Process.Pid, "VmHWM") }},
			peak{"decree-worker", func() int { return testtool.ProcStatusKiB(t, w.Cmd.Process.Pid, "VmHWM") }})
	}

	ctlKiB, out := runCtlFromFile(t, p.dir, bodyPath, "run", "-q", "-m", "big", "-v", "routine=develop")
	id := p.onlyRun()
	msg := p.path(".decree/runs/" + id + "/message.md")
	fi, err := os.Stat(msg)
	if err != nil {
		t.Fatalf("no message.md: %v\n%s", err, out)
	}
	if got := strings.TrimSpace(p.read("message-size.txt")); got != strconv.FormatInt(fi.Size(), 10) {
		t.Errorf("the routine saw %s bytes of message.md, the controller has %d", got, fi.Size())
	}
	if got, want := strings.TrimSpace(p.read("message-sha.txt")), fileSHA(t, msg, 0); got != want {
		t.Errorf("the routine saw message.md with sha256 %s, the controller's has %s", got, want)
	}
	if got := fileSHA(t, msg, fi.Size()-size); got != bodySum {
		t.Errorf("message.md does not end with the body byte for byte (sha256 %s, want %s)", got, bodySum)
	}

	peaks = append(peaks, peak{"decreectl", func() int { return ctlKiB }})
	for _, pr := range peaks {
		kib := pr.kib()
		t.Logf("%s peak RSS with a 60 MB message (%s): %.1f MB", pr.name, mode, float64(kib)/1024)
		if kib >= bodyGoalKiB {
			t.Errorf("%s peaked at %.1f MB with a 60 MB message (%s); the goal is under 100 MB whatever the message size", pr.name, float64(kib)/1024, mode)
		}
	}
	if mode == "embedded" {
		return // no controller is left to ask
	}

	// The API: the body is too large to travel inline, and streams whole.
	conn, err := grpc.NewClient("unix://"+p.path(".decree/decree.sock"), grpc.WithTransportCredentials(insecure.NewCredentials()), auth.MessageSizeDialOption())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	client := decreev1.NewControllerServiceClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	gm, err := client.GetMessage(ctx, &decreev1.GetMessageRequest{Id: id})
	if err != nil {
		t.Fatal(err)
	}
	if !gm.GetBodyOmitted() || len(gm.GetBody()) != 0 || gm.GetBodySize() != size {
		t.Errorf("GetMessage: body_omitted %v, %d body bytes, body_size %d; want the body left out and its size %d", gm.GetBodyOmitted(), len(gm.GetBody()), gm.GetBodySize(), size)
	}
	st, err := client.GetMessageBody(ctx, &decreev1.GetMessageBodyRequest{Id: id})
	if err != nil {
		t.Fatal(err)
	}
	h := sha256.New()
	var n uint64
	for {
		r, err := st.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if r.GetOffset() != n {
			t.Fatalf("GetMessageBody piece at offset %d, want %d", r.GetOffset(), n)
		}
		h.Write(r.GetData())
		n += uint64(len(r.GetData()))
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != bodySum || n != size {
		t.Errorf("GetMessageBody streamed %d bytes with sha256 %s; want %d bytes, %s", n, got, size, bodySum)
	}
}

// writeRandomText writes size bytes of lines of random hex to path,
// without holding them (the test's own memory counts in decreectl's peak
// as wait4 reports it), and returns their sha256.
func writeRandomText(t *testing.T, path string, size int64) string {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	bw := bufio.NewWriter(io.MultiWriter(f, h))
	raw := make([]byte, 32)
	for written := int64(0); written < size; {
		if _, err := rand.Read(raw); err != nil {
			t.Fatal(err)
		}
		line := hex.EncodeToString(raw) + "\n"
		if rest := size - written; int64(len(line)) > rest {
			line = line[:rest]
		}
		bw.WriteString(line)
		written += int64(len(line))
	}
	if err := bw.Flush(); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// fileSHA is the sha256 of the file at path from offset on.
func fileSHA(t *testing.T, path string, offset int64) string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// runCtlFromFile runs the decreectl binary in dir with stdin from the file
// in and returns its peak RSS (KiB) and output; it fails the test unless
// decreectl exits 0. The peak comes from GNU time, which starts decreectl
// itself: a process started straight from this test would report the
// test's own memory (shared until exec) as its peak, which under -race is
// hundreds of MB.
func runCtlFromFile(t *testing.T, dir, in string, args ...string) (int, string) {
	t.Helper()
	timeBin := testtool.Require(t, "time")
	f, err := os.Open(in)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	report := filepath.Join(t.TempDir(), "maxrss")
	cmd := exec.CommandContext(ctx, timeBin, append([]string{"-f", "%M", "-o", report, bin(t, "decreectl"), "-C", dir}, args...)...)
	cmd.Dir, cmd.Stdin = dir, f
	cmd.Env = append(os.Environ(), "DECREE_CONTROLLER=")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("decreectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	b, err := os.ReadFile(report)
	if err != nil {
		t.Fatal(err)
	}
	kib, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatalf("GNU time reported %q: %v", b, err)
	}
	return kib, string(out)
}
