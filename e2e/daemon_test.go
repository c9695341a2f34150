package e2e

import (
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/decreehq/decree/internal/testtool"
)

// TestDaemon: `decreectl daemon` started as its own process fires a
// `* * * * *` cron file within 65 s, processes a file dropped into the
// inbox by hand, shows in `status` that a daemon serves the project, and
// exits 0 on SIGTERM.
func TestDaemon(t *testing.T) {
	t.Parallel()
	p := newProject(t, binary, baseConfig)
	p.routine("develop", "", `echo "$message_id $(grep -m1 '^trigger:' "$message_file" || echo trigger: inbox)" >> .decree/handled.log`)
	p.routine("report", "", `echo "report for $message_id" >> report.txt`)
	p.write(".decree/cron/every-minute.md", "---\ncron: \"* * * * *\"\nroutine: report\n---\nReport.\n")
	// A routine added before the start is registered by routine discovery.
	d := start(t, p.dir, "decreectl", "-C", p.dir, "daemon", "--interval", "200ms")
	testtool.WaitFor(t, 20*time.Second, "the daemon's socket", func() bool {
		select {
		case <-d.Done():
			t.Fatalf("decreectl daemon exited early:\n%s", d.Out)
		default:
		}
		return socketLive(p.path(".decree/decree.sock"))
	})
	contains(t, "config.yml after routine discovery", p.read(".decree/config.yml"), "report:")

	r := p.ctl("", "status")
	mustCode(t, r, 0)
	contains(t, "status", r.stdout, "served by   a daemon")

	p.write(".decree/inbox/by-hand.md", "dropped in by hand\n")
	testtool.WaitFor(t, 30*time.Second, "the dropped file to be processed", func() bool {
		return p.exists(".decree/inbox/done/by-hand.md")
	})
	contains(t, "handled.log", p.read(".decree/handled.log"), "trigger: inbox")

	testtool.WaitFor(t, 65*time.Second, "the cron file to fire and its message to run", func() bool {
		return strings.Contains(strings.Join(p.list(".decree/inbox/done"), " "), "every-minute-")
	})
	contains(t, "report.txt", p.read("report.txt"), "report for ")
	// A message is filed to done/ before its run.json is written, and the
	// cron file may fire again meanwhile: read only the records written so
	// far, until both triggers are there.
	triggers := map[string]bool{}
	testtool.WaitFor(t, 20*time.Second, "run.json of the inbox and the cron message", func() bool {
		for _, id := range p.runs() {
			if p.exists(".decree/runs/" + id + "/run.json") {
				triggers[p.runJSON(id).Trigger] = true
			}
		}
		return triggers["cron:every-minute"] && triggers["inbox"]
	})
	r = p.ctl("", "cron", "list")
	mustCode(t, r, 0)
	if fields := strings.Fields(strings.Split(r.stdout, "\n")[1]); len(fields) < 9 || fields[0] != "every-minute.md" || fields[6] != "report" || fields[7] == "never" {
		t.Errorf("cron list after a fire:\n%s", r.stdout)
	}

	d.Signal(syscall.SIGTERM)
	if code := d.Wait(t, 20*time.Second); code != 0 {
		t.Errorf("daemon exit %d after SIGTERM, want 0\n%s", code, d.Out)
	}
	if socketLive(p.path(".decree/decree.sock")) {
		t.Error("socket still served after the daemon exited")
	}
	contains(t, "daemon output", d.Out.String(), "daemon serving")
}

// TestDaemonStopsDuringAttempt: SIGTERM while a routine runs interrupts the
// attempt (no routine process survives), the daemon exits 0 with the
// message still queued, and the next daemon retries and finishes it.
func TestDaemonStopsDuringAttempt(t *testing.T) {
	t.Parallel()
	p := newProject(t, binary, baseConfig)
	p.routine("develop", "", `echo "$$" > .decree/routine.pid
if [ ! -e .decree/ran-once ]; then touch .decree/ran-once; sleep 120; fi
echo "finished on attempt $DECREE_ATTEMPT" > result.txt`)
	daemon := func() *testtool.Proc {
		d := start(t, p.dir, "decreectl", "-C", p.dir, "daemon", "--interval", "200ms")
		testtool.WaitFor(t, 20*time.Second, "the daemon's socket", func() bool {
			return socketLive(p.path(".decree/decree.sock"))
		})
		return d
	}
	d := daemon()
	p.write(".decree/inbox/slow.md", "take your time\n")
	testtool.WaitFor(t, 30*time.Second, "the routine to start", func() bool { return p.exists(".decree/routine.pid") })
	pid := readPid(t, p, ".decree/routine.pid")
	d.Signal(syscall.SIGTERM)
	if code := d.Wait(t, 30*time.Second); code != 0 {
		t.Fatalf("daemon exit %d after SIGTERM, want 0\n%s", code, d.Out)
	}
	if alive(pid) {
		t.Error("the routine outlived the daemon")
	}
	if !p.exists(".decree/inbox/slow.md") {
		t.Fatalf("the interrupted message left the inbox: %v", p.list(".decree/inbox"))
	}
	daemon()
	testtool.WaitFor(t, 30*time.Second, "the retry to finish", func() bool { return p.exists(".decree/inbox/done/slow.md") })
	// The interrupted attempt was no failure: it ran again as attempt 1.
	contains(t, "result.txt", p.read("result.txt"), "finished on attempt 1")
}
