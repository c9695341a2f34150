package e2e

import (
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/decreehq/decree/internal/testtool"
)

// TestFullDiskPausesAndResumes runs a controller and a worker on a project
// on a 40 MiB tmpfs with --min-free-bytes 16 MiB, fills the disk, drops a
// message: the controller logs the full disk, emits a warning event,
// `decreectl status` shows it, and the message waits in the inbox. Once
// the filler is removed, processing resumes by itself.
func TestFullDiskPausesAndResumes(t *testing.T) {
	t.Parallel()
	dir := testtool.MountTmpfs(t, "40m")
	p := newProjectIn(t, dir, binary, baseConfig)
	p.routine("develop", "", `echo ran > ran.txt`)
	p.write(".gitignore", "filler.bin\n")
	ctl := startController(t, p, "--min-free-bytes", "16777216")
	startWorker(t, p, "disk-worker")

	// Leave about 8 MiB free.
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	free := int64(st.Bavail) * int64(st.Bsize)
	filler := p.path("filler.bin")
	if err := os.WriteFile(filler, make([]byte, free-8<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	p.write(".decree/inbox/waits.md", "---\nroutine: develop\n---\nwork\n")

	testtool.WaitFor(t, 20*time.Second, "the controller to log the full disk", func() bool {
		return strings.Contains(ctl.Out.String(), "disk full")
	})
	r := p.ctl("", "status")
	mustCode(t, r, 0)
	contains(t, "status", r.stdout, "problem     the disk holding "+dir+" is full")
	time.Sleep(2 * time.Second) // a few poll intervals: nothing may be taken meanwhile
	if !p.exists(".decree/inbox/waits.md") || p.exists("ran.txt") {
		t.Fatalf("a message was processed while the disk was full\n%s", ctl.Out)
	}
	contains(t, "event log", p.read(".decree/events.jsonl"), "is full")

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	testtool.WaitFor(t, 30*time.Second, "the message to run once space was freed", func() bool {
		return p.exists(".decree/inbox/done/waits.md")
	})
	if p.read("ran.txt") != "ran\n" {
		t.Errorf("ran.txt = %q", p.read("ran.txt"))
	}
	contains(t, "event log", p.read(".decree/events.jsonl"), "available again")
	r = p.ctl("", "status")
	notContains(t, "status after space returned", r.stdout, "problem")
}

// TestNoSpaceKeepsTheMessageQueued: the free space is above the pause
// threshold, but the message does not fit in its run directory (ENOSPC):
// the message stays queued (never dead-lettered), the controller reports
// the full disk, and processing resumes once space is freed.
func TestNoSpaceKeepsTheMessageQueued(t *testing.T) {
	t.Parallel()
	dir := testtool.MountTmpfs(t, "8m")
	p := newProjectIn(t, dir, binary, baseConfig)
	p.routine("develop", "", `echo ran > ran.txt`)
	p.write(".gitignore", "filler.bin\n")
	p.write(".decree/inbox/big.md", "---\nroutine: develop\n---\n"+strings.Repeat("a large message line\n", 16<<10))
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	filler := p.path("filler.bin")
	if err := os.WriteFile(filler, make([]byte, int64(st.Bavail)*int64(st.Bsize)-128<<10), 0o644); err != nil {
		t.Fatal(err)
	}
	ctl := startController(t, p, "--min-free-bytes", "4096")
	startWorker(t, p, "disk-worker")
	testtool.WaitFor(t, 20*time.Second, "the controller to report the full disk", func() bool {
		return strings.Contains(ctl.Out.String(), "disk full")
	})
	if !p.exists(".decree/inbox/big.md") || len(p.messages(".decree/inbox/dead")) != 0 {
		t.Fatalf("the message left the inbox on a full disk: dead %v\n%s", p.messages(".decree/inbox/dead"), ctl.Out)
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	testtool.WaitFor(t, 30*time.Second, "the message to run once space was freed", func() bool {
		return p.exists(".decree/inbox/done/big.md")
	})
}

// TestDiskFillsDuringAttempt: the routine fills the disk and goes on
// printing, so storing its log fails: the controller marks the disk full
// at once (status shows the problem and a warning event says so) instead
// of showing a running message and nothing else; once space is freed the
// message finishes.
func TestDiskFillsDuringAttempt(t *testing.T) {
	t.Parallel()
	dir := testtool.MountTmpfs(t, "40m")
	p := newProjectIn(t, dir, binary, baseConfig)
	p.write(".gitignore", "filler.bin\n")
	p.routine("develop", "", `head -c $(( $(df -B1 --output=avail . | tail -1) )) /dev/zero > filler.bin 2>/dev/null || true
for i in $(seq 1 400); do echo "output line $i of a routine that keeps talking on a full disk"; done
while [ ! -e .decree/go-on ]; do sleep 0.1; done
echo done > done.txt`)
	startController(t, p, "--min-free-bytes", "1048576")
	startWorker(t, p, "disk-worker")
	p.write(".decree/inbox/fill.md", "fill the disk\n")
	testtool.WaitFor(t, 30*time.Second, "status to show the full disk during the attempt", func() bool {
		r := p.ctl("", "status")
		return strings.Contains(r.stdout, "problem") && strings.Contains(r.stdout, "is full")
	})
	contains(t, "event log", p.read(".decree/events.jsonl"), "is full")
	if err := os.Remove(p.path("filler.bin")); err != nil {
		t.Fatal(err)
	}
	p.write(".decree/go-on", "")
	testtool.WaitFor(t, 30*time.Second, "the message to finish once space was freed", func() bool {
		return p.exists(".decree/inbox/done/fill.md")
	})
}
