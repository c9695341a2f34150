package replica_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/decreehq/decree/internal/testtool"
)

// End-to-end tests: a real decree-controller and real decree-worker
// processes, each worker with its own workspace directory (a replica), all
// talking over the controller's unix socket.

// start runs args in the background; it is stopped at cleanup.
func start(t *testing.T, name string, args ...string) *testtool.Proc {
	t.Helper()
	return testtool.Start(t, name, exec.Command(args[0], args[1:]...))
}

const spawnRoutine = `#!/usr/bin/env bash
# Spawn a chain: every message records itself; seq 0 queues a follow-up
# through the outbox, seq 1 one through the inbox, seq 2 ends the chain.
set -euo pipefail
echo "$message_id" >> log.txt
mkdir -p out
echo "seq $seq" > "out/$seq.txt"
grep -q "spec line" "$spec_file"
case "$seq" in
0)
  rm -f delete-me.txt
  chmod +x tool.sh
  ln -s out/0.txt latest
  printf -- '---\nroutine: spawn\ninput_file: .decree/migrations/one.spec.md\n---\nsecond\n' > .decree/outbox/next.md
  ;;
1)
  printf -- '---\nroutine: spawn\ninput_file: .decree/migrations/one.spec.md\n---\nthird\n' > ".decree/inbox/${chain}-2.md"
  ;;
2)
  head -c 3000000 /dev/urandom > big.bin
  ;;
esac
`

const slowRoutine = `#!/usr/bin/env bash
# The first attempt announces itself (with its pid) and hangs; later ones
# finish at once.
set -euo pipefail
echo "attempt $DECREE_ATTEMPT" >> slow.txt
if [ "$DECREE_ATTEMPT" = 1 ]; then
  echo $$ > started-marker
  sleep 120
fi
echo finished >> slow.txt
`

const failRoutine = `#!/usr/bin/env bash
# Always fails, leaving junk behind in the tree.
echo "junk from attempt $DECREE_ATTEMPT" > junk.txt
exit 1
`

const checkRoutine = `#!/usr/bin/env bash
# Succeeds only in a replica without the failed message's junk.
set -euo pipefail
if [ -e junk.txt ]; then echo "junk.txt is still here" >&2; exit 3; fi
echo clean > checked.txt
`

const pauseRoutine = `#!/usr/bin/env bash
# Announces itself, pauses, finishes.
set -euo pipefail
echo begin >> pause.txt
echo $$ > paused-marker
sleep 3
echo end >> pause.txt
echo "pause routine output"
`

// project creates the controller's project directory.
func project(t *testing.T, dir string) string {
	t.Helper()
	p := filepath.Join(dir, "P")
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		states, _ := filepath.Glob(filepath.Join(p, ".decree", "runs", "*", "state.json"))
		for _, s := range states {
			b, _ := os.ReadFile(s)
			t.Logf("%s:\n%s", s, b)
		}
	})
	files := map[string]string{
		".decree/config.yml":             "max_retries: 3\ndefault_routine: spawn\nhooks:\n  afterEach: stamp\n",
		".decree/routines/spawn.sh":      spawnRoutine,
		".decree/routines/slow.sh":       slowRoutine,
		".decree/routines/pause.sh":      pauseRoutine,
		".decree/routines/fail.sh":       failRoutine,
		".decree/routines/stamp.sh":      "#!/usr/bin/env bash\necho \"$message_id exit $DECREE_ROUTINE_EXIT_CODE\" >> hooks.txt\n",
		".decree/routines/check.sh":      checkRoutine,
		".decree/migrations/one.spec.md": "# One\n\nspec line\n",
		"delete-me.txt":                  "bye\n",
		"tool.sh":                        "echo tool\n",
		"src/main.txt":                   "main\n",
		".gitignore":                     "*.tmp\n",
	}
	for rel, content := range files {
		full := filepath.Join(p, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		mode := os.FileMode(0o644)
		if strings.HasSuffix(rel, ".sh") && strings.HasPrefix(rel, ".decree") {
			mode = 0o755
		}
		if err := os.WriteFile(full, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
	}
	return p
}

func dropMessage(t *testing.T, p, name, body string) {
	t.Helper()
	dir := filepath.Join(p, ".decree", "inbox")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	tmp := filepath.Join(dir, "."+name+".tmp")
	if err := os.WriteFile(tmp, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, name+".md")); err != nil {
		t.Fatal(err)
	}
}

func doneCount(p string) int {
	ents, _ := os.ReadDir(filepath.Join(p, ".decree", "inbox", "done"))
	return len(ents)
}

func inboxEmpty(p string) bool {
	ents, _ := os.ReadDir(filepath.Join(p, ".decree", "inbox"))
	for _, e := range ents {
		if !e.IsDir() && strings.HasSuffix(e.Name(), ".md") {
			return false
		}
	}
	return true
}

type runState struct {
	MessageID string `json:"message_id"`
	Routine   string `json:"routine"`
	Attempts  []struct {
		N        int    `json:"attempt"`
		ExitCode int    `json:"exit_code"`
		Error    string `json:"error"`
		WorkerID string `json:"worker_id"`
		Start    time.Time
		End      time.Time
	} `json:"attempts"`
}

// runsOf reads the state of every run of routine.
func runsOf(t *testing.T, p, routine string) []runState {
	t.Helper()
	dirs, _ := filepath.Glob(filepath.Join(p, ".decree", "runs", "*", "state.json"))
	var out []runState
	for _, d := range dirs {
		b, err := os.ReadFile(d)
		if err != nil {
			t.Fatal(err)
		}
		var s runState
		if err := json.Unmarshal(b, &s); err != nil {
			t.Fatalf("%s: %v", d, err)
		}
		if s.Routine == routine {
			out = append(out, s)
		}
	}
	return out
}

func read(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// killGroupOf kills the process group whose leader's pid is in file.
func killGroupOf(file string) {
	b, err := os.ReadFile(file)
	if err != nil {
		return
	}
	if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && pid > 1 {
		_ = syscall.Kill(-pid, syscall.SIGKILL)
	}
}

func TestEndToEndReplicaWorkers(t *testing.T) {
	testtool.Require(t, "bash")
	bin := testtool.Binaries(t)
	dir := t.TempDir()
	p := project(t, dir)
	w1, w2 := filepath.Join(dir, "W1"), filepath.Join(dir, "W2")
	for _, w := range []string{w1, w2} {
		if err := os.Mkdir(w, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	const ttl = 2 * time.Second
	start(t, "controller", filepath.Join(bin, "decree-controller"), "--project", p, "--lease-ttl", ttl.String())
	sock := filepath.Join(p, ".decree", "decree.sock")
	testtool.WaitFor(t, 30*time.Second, "the controller socket", func() bool { _, err := os.Stat(sock); return err == nil })
	workers := map[string]*testtool.Proc{
		"w1": start(t, "worker1", filepath.Join(bin, "decree-worker"), "--controller", "unix://"+sock, "--workspace", w1, "--id", "w1"),
		"w2": start(t, "worker2", filepath.Join(bin, "decree-worker"), "--controller", "unix://"+sock, "--workspace", w2, "--id", "w2"),
	}

	t.Run("chain with follow-ups", func(t *testing.T) {
		dropMessage(t, p, "task", "---\nroutine: spawn\ninput_file: .decree/migrations/one.spec.md\n---\nfirst\n")
		testtool.WaitFor(t, 60*time.Second, "three messages done", func() bool { return doneCount(p) == 3 && inboxEmpty(p) })
		lines := strings.Fields(read(t, filepath.Join(p, "log.txt")))
		if len(lines) != 3 || !strings.HasSuffix(lines[0], "-0") || !strings.HasSuffix(lines[1], "-1") || !strings.HasSuffix(lines[2], "-2") {
			t.Errorf("log.txt = %q, want the chain's three ids in order", lines)
		}
		for seq := 0; seq < 3; seq++ {
			if got := read(t, filepath.Join(p, "out", fmt.Sprintf("%d.txt", seq))); got != fmt.Sprintf("seq %d\n", seq) {
				t.Errorf("out/%d.txt = %q", seq, got)
			}
		}
		if _, err := os.Lstat(filepath.Join(p, "delete-me.txt")); !os.IsNotExist(err) {
			t.Errorf("delete-me.txt still in the controller's tree: %v", err)
		}
		if fi, err := os.Stat(filepath.Join(p, "tool.sh")); err != nil || fi.Mode().Perm()&0o100 == 0 {
			t.Errorf("tool.sh not executable on the controller: %v %v", fi, err)
		}
		if target, err := os.Readlink(filepath.Join(p, "latest")); err != nil || target != "out/0.txt" {
			t.Errorf("latest -> %q, %v; want a symlink to out/0.txt", target, err)
		}
		if fi, err := os.Stat(filepath.Join(p, "big.bin")); err != nil || fi.Size() != 3000000 {
			t.Errorf("big.bin on the controller: %v %v", fi, err)
		}
		// Every attempt succeeded, and both replicas took part (routines and
		// afterEach hooks alternate between the workers).
		for _, r := range runsOf(t, p, "spawn") {
			for _, a := range r.Attempts {
				if a.ExitCode != 0 {
					t.Errorf("%s attempt %d failed: %s", r.MessageID, a.N, a.Error)
				}
			}
		}
		for _, ws := range []string{w1, w2} {
			if _, err := os.Stat(filepath.Join(ws, ".decree", "replica", "statcache")); err != nil {
				t.Errorf("replica %s never synced: %v", ws, err)
			}
		}
		// The afterEach hook ran on replicas too, and its change came back.
		hooks := read(t, filepath.Join(p, "hooks.txt"))
		for _, id := range lines {
			if strings.Count(hooks, id+" exit 0\n") != 1 {
				t.Errorf("hooks.txt = %q, want one afterEach line for %s", hooks, id)
			}
		}
		if _, err := os.Stat(filepath.Join(p, ".decree", "replica")); !os.IsNotExist(err) {
			t.Error("the controller's project has replica state: a worker worked in place")
		}
		// The diff of the last message is the controller's own checkpoint diff.
		if diffs, _ := filepath.Glob(filepath.Join(p, ".decree", "runs", "*", "changes.diff")); len(diffs) != 3 {
			t.Errorf("%d changes.diff files, want 3", len(diffs))
		}
	})

	t.Run("revert happens on the controller and replicas follow", func(t *testing.T) {
		dropMessage(t, p, "doomed", "---\nroutine: fail\n---\nfail\n")
		testtool.WaitFor(t, 60*time.Second, "the failing message dead-lettered", func() bool {
			ents, _ := os.ReadDir(filepath.Join(p, ".decree", "inbox", "dead"))
			return len(ents) > 0 && inboxEmpty(p)
		})
		if _, err := os.Lstat(filepath.Join(p, "junk.txt")); !os.IsNotExist(err) {
			t.Fatalf("junk.txt survived the revert on the controller: %v", err)
		}
		runs := runsOf(t, p, "fail")
		if len(runs) != 1 || len(runs[0].Attempts) != 3 {
			t.Fatalf("runs of fail: %+v, want three attempts", runs)
		}
		dropMessage(t, p, "check1", "---\nroutine: check\n---\ncheck\n")
		testtool.WaitFor(t, 60*time.Second, "the first check done", func() bool { return doneCount(p) == 4 && inboxEmpty(p) })
		dropMessage(t, p, "check2", "---\nroutine: check\n---\ncheck\n")
		testtool.WaitFor(t, 60*time.Second, "the second check done", func() bool { return doneCount(p) == 5 && inboxEmpty(p) })
		for _, r := range runsOf(t, p, "check") {
			for _, a := range r.Attempts {
				if a.ExitCode != 0 {
					t.Errorf("check on %s failed: %s", a.WorkerID, a.Error)
				}
			}
		}
		// Both replicas synced since, so the junk of the failed attempts is
		// gone from them too.
		for _, ws := range []string{w1, w2} {
			if _, err := os.Stat(filepath.Join(ws, "junk.txt")); !os.IsNotExist(err) {
				t.Errorf("replica %s still has junk.txt after syncing: %v", ws, err)
			}
		}
	})

	t.Run("kill -9 fails over within the TTL", func(t *testing.T) {
		dropMessage(t, p, "slow", "---\nroutine: slow\n---\nslow work\n")
		var victim, marker string
		testtool.WaitFor(t, 60*time.Second, "the slow routine to start on a worker", func() bool {
			for id, ws := range map[string]string{"w1": w1, "w2": w2} {
				if _, err := os.Stat(filepath.Join(ws, "started-marker")); err == nil {
					victim, marker = id, filepath.Join(ws, "started-marker")
					return true
				}
			}
			return false
		})
		t.Cleanup(func() { killGroupOf(marker) }) // the orphaned routine
		killed := time.Now()
		workers[victim].Signal(syscall.SIGKILL)
		<-workers[victim].Done()
		testtool.WaitFor(t, 60*time.Second, "the slow message done", func() bool { return doneCount(p) == 6 && inboxEmpty(p) })
		runs := runsOf(t, p, "slow")
		if len(runs) != 1 || len(runs[0].Attempts) != 2 {
			t.Fatalf("runs of slow: %+v, want one run with two attempts", runs)
		}
		a1, a2 := runs[0].Attempts[0], runs[0].Attempts[1]
		if a1.WorkerID != victim || !strings.Contains(a1.Error, "worker lost") {
			t.Errorf("attempt 1 on %s: %q, want worker lost on %s", a1.WorkerID, a1.Error, victim)
		}
		if a2.WorkerID == victim || a2.ExitCode != 0 {
			t.Errorf("attempt 2 on %s exit %d, want success on the other worker", a2.WorkerID, a2.ExitCode)
		}
		if lost := a1.End.Sub(killed); lost > ttl+2*time.Second {
			t.Errorf("the lease was declared lost %s after the kill, want within the TTL (%s) plus a little", lost, ttl)
		}
		if got := read(t, filepath.Join(p, "slow.txt")); got != "attempt 2\nfinished\n" {
			t.Errorf("slow.txt = %q, want only the second attempt's work", got)
		}
	})
}

// proxy forwards unix connections to target and can cut them all.
type proxy struct {
	lis       net.Listener
	target    string
	mu        sync.Mutex
	conns     []net.Conn
	cuts      int
	downUntil time.Time // connections before this are refused
}

func newProxy(t *testing.T, path, target string) *proxy {
	t.Helper()
	lis, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	px := &proxy{lis: lis, target: target}
	go px.serve()
	t.Cleanup(func() { lis.Close(); px.cut() })
	return px
}

func (px *proxy) serve() {
	for {
		c, err := px.lis.Accept()
		if err != nil {
			return
		}
		px.mu.Lock()
		down := time.Now().Before(px.downUntil)
		px.mu.Unlock()
		if down {
			c.Close()
			continue
		}
		up, err := net.Dial("unix", px.target)
		if err != nil {
			c.Close()
			continue
		}
		px.mu.Lock()
		px.conns = append(px.conns, c, up)
		px.mu.Unlock()
		go func() { io.Copy(up, c); up.Close() }()
		go func() { io.Copy(c, up); c.Close() }()
	}
}

// cut closes every connection made so far and refuses new ones for
// outage.
func (px *proxy) cut(outage ...time.Duration) {
	px.mu.Lock()
	defer px.mu.Unlock()
	if len(outage) > 0 {
		px.downUntil = time.Now().Add(outage[0])
	}
	for _, c := range px.conns {
		c.Close()
	}
	px.conns = nil
	px.cuts++
}

func TestEndToEndDroppedConnectionTakesLeasePath(t *testing.T) {
	const ttl = 2 * time.Second
	tests := []struct {
		name   string
		outage time.Duration
		lost   bool // the lease must be lost (else either outcome is fine)
	}{
		{"short cut: reconnect under the same lease or retry", 0, false},
		{"outage longer than the TTL: worker lost, then retried", 2 * ttl, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			testtool.Require(t, "bash")
			bin := testtool.Binaries(t)
			dir := t.TempDir()
			p := project(t, dir)
			w := filepath.Join(dir, "W")
			if err := os.Mkdir(w, 0o755); err != nil {
				t.Fatal(err)
			}
			start(t, "controller", filepath.Join(bin, "decree-controller"), "--project", p, "--lease-ttl", ttl.String())
			sock := filepath.Join(p, ".decree", "decree.sock")
			testtool.WaitFor(t, 30*time.Second, "the controller socket", func() bool { _, err := os.Stat(sock); return err == nil })
			px := newProxy(t, filepath.Join(dir, "proxy.sock"), sock)
			start(t, "worker", filepath.Join(bin, "decree-worker"), "--controller", "unix://"+filepath.Join(dir, "proxy.sock"), "--workspace", w, "--id", "wp")

			dropMessage(t, p, "pause", "---\nroutine: pause\n---\npause\n")
			marker := filepath.Join(w, "paused-marker")
			testtool.WaitFor(t, 60*time.Second, "the routine to start", func() bool { _, err := os.Stat(marker); return err == nil })
			t.Cleanup(func() { killGroupOf(marker) })
			px.cut(tt.outage)
			testtool.WaitFor(t, 60*time.Second, "the message done", func() bool { return doneCount(p) == 1 && inboxEmpty(p) })

			runs := runsOf(t, p, "pause")
			if len(runs) != 1 {
				t.Fatalf("runs: %+v", runs)
			}
			atts := runs[0].Attempts
			last := atts[len(atts)-1]
			switch {
			case len(atts) == 1 && last.ExitCode == 0 && !tt.lost:
				t.Log("the worker reconnected and its result was accepted under the same lease")
			case len(atts) == 2 && strings.Contains(atts[0].Error, "worker lost") && last.ExitCode == 0:
				t.Log("the lease was lost and the attempt retried")
			default:
				t.Fatalf("attempts %+v, want one accepted attempt, or a lost one then a successful one", atts)
			}
			// Nothing lost, nothing duplicated: the controller's tree holds
			// the work of exactly the accepted attempt.
			if got := read(t, filepath.Join(p, "pause.txt")); got != "begin\nend\n" {
				t.Errorf("pause.txt = %q, want one begin and one end", got)
			}
			logs, _ := filepath.Glob(filepath.Join(p, ".decree", "runs", runs[0].MessageID, "routine*.log"))
			var all bytes.Buffer
			for _, l := range logs {
				all.WriteString(read(t, l))
			}
			if n := strings.Count(all.String(), "pause routine output"); n != 1 {
				t.Errorf("routine output appears %d times in the logs %v, want once", n, logs)
			}
		})
	}
}

// linksRoutine checks that the replica holds the project's symlinks as
// links, then adds an absolute one and retargets another; with FAIL in the
// message it changes the links and fails.
const linksRoutine = `#!/usr/bin/env bash
set -euo pipefail
[ "$(readlink venv/bin/python)" = /usr/bin/python3 ] || { echo "venv/bin/python -> $(readlink venv/bin/python)" >&2; exit 3; }
[ "$(readlink up)" = ../../outside/data.txt ] || { echo "up -> $(readlink up)" >&2; exit 3; }
[ ! -e venv/bin/python.real ] || exit 4
if grep -q FAIL "$message_file"; then
  ln -sfn /nonexistent venv/bin/python
  rm up
  exit 1
fi
ln -s /etc/hostname host
ln -sfn /usr/bin/env venv/bin/python
echo ok > ok.txt
`

// TestEndToEndReplicaSymlinks: a project with absolute and escaping
// symlinks (a virtualenv's bin/python -> /usr/bin/python3) works with a
// replica worker in a separate process: the links arrive as links, new
// and retargeted links come back as links, a failed message's revert
// restores them, and nothing they point to is read or written.
func TestEndToEndReplicaSymlinks(t *testing.T) {
	testtool.Require(t, "bash")
	bin := testtool.Binaries(t)
	dir := t.TempDir()
	p := project(t, dir)
	outside := filepath.Join(dir, "outside")
	if err := os.MkdirAll(outside, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(outside, "data.txt"), []byte("outside\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(p, ".decree", "routines", "links.sh"), []byte(linksRoutine), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(p, "venv", "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	for l, target := range map[string]string{"venv/bin/python": "/usr/bin/python3", "up": "../../outside/data.txt"} {
		if err := os.Symlink(target, filepath.Join(p, filepath.FromSlash(l))); err != nil {
			t.Fatal(err)
		}
	}
	ws := filepath.Join(dir, "W")
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	start(t, "controller", filepath.Join(bin, "decree-controller"), "--project", p, "--lease-ttl", "3s")
	sock := filepath.Join(p, ".decree", "decree.sock")
	testtool.WaitFor(t, 30*time.Second, "the controller socket", func() bool { _, err := os.Stat(sock); return err == nil })
	start(t, "worker", filepath.Join(bin, "decree-worker"), "--controller", "unix://"+sock, "--workspace", ws, "--id", "links")

	readlink := func(root, rel string) string {
		got, err := os.Readlink(filepath.Join(root, filepath.FromSlash(rel)))
		if err != nil {
			return "(" + err.Error() + ")"
		}
		return got
	}
	dropMessage(t, p, "links", "---\nroutine: links\n---\nwork\n")
	testtool.WaitFor(t, 60*time.Second, "the links message done", func() bool { return doneCount(p) == 1 && inboxEmpty(p) })
	for _, r := range runsOf(t, p, "links") {
		for _, a := range r.Attempts {
			if a.ExitCode != 0 {
				t.Fatalf("attempt %d failed on the replica: %s", a.N, a.Error)
			}
		}
	}
	for rel, want := range map[string]string{"host": "/etc/hostname", "venv/bin/python": "/usr/bin/env", "up": "../../outside/data.txt"} {
		if got := readlink(p, rel); got != want {
			t.Errorf("controller: %s -> %s, want %s", rel, got, want)
		}
	}
	if got := read(t, filepath.Join(p, "ok.txt")); got != "ok\n" {
		t.Errorf("ok.txt = %q", got)
	}

	// A failing message changes links; the revert restores them on the
	// controller, and the replica follows at its next sync.
	dropMessage(t, p, "fails", "---\nroutine: links\n---\nFAIL\n")
	testtool.WaitFor(t, 90*time.Second, "the failing message dead-lettered", func() bool {
		ents, _ := os.ReadDir(filepath.Join(p, ".decree", "inbox", "dead"))
		return len(ents) > 0 && inboxEmpty(p)
	})
	for rel, want := range map[string]string{"venv/bin/python": "/usr/bin/env", "up": "../../outside/data.txt", "host": "/etc/hostname"} {
		if got := readlink(p, rel); got != want {
			t.Errorf("controller after the revert: %s -> %s, want %s", rel, got, want)
		}
	}
	if got := read(t, filepath.Join(outside, "data.txt")); got != "outside\n" {
		t.Errorf("the file outside the project changed: %q", got)
	}
	if ents, _ := os.ReadDir(outside); len(ents) != 1 {
		t.Errorf("files appeared outside the project: %v", ents)
	}
}
