package dashboard_test

import (
	"context"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/decreehq/decree/controller/dashboard"
	"github.com/decreehq/decree/internal/testtool"
	decreev1 "github.com/decreehq/decree/proto/decree/v1"
)

func TestMain(m *testing.M) {
	code := m.Run()
	testtool.Cleanup()
	os.Exit(code)
}

// Routines the tests use (stand-ins: plain bash).
var routines = map[string]string{
	// slow prints a line, waits for .gate, prints another, waits for .gate2.
	"slow.sh": `#!/usr/bin/env bash
# Slow: prints, waits for the file .gate, prints again, waits for .gate2.
set -euo pipefail
label="${label:-none}"
if [ "${DECREE_PRE_CHECK:-}" = "true" ]; then exit 0; fi
echo "first line of the slow routine (label $label)"
while [ ! -e .gate ]; do sleep 0.05; done
echo "after the gate: a live line"
while [ ! -e .gate2 ]; do sleep 0.05; done
echo finished
`,
	// edit writes notes.txt (lines lines) and changes README.md.
	"edit.sh": `#!/usr/bin/env bash
# Edit: writes notes.txt with numbered lines and adds a line to README.md.
set -euo pipefail
lines="${lines:-12}"
if [ "${DECREE_PRE_CHECK:-}" = "true" ]; then exit 0; fi
seq 1 "$lines" | sed 's/^/note line /' > notes.txt
echo "edited by $message_id" >> README.md
echo "wrote $lines lines to notes.txt"
`,
	// big prints about 200 MB, then a last line.
	"big.sh": `#!/usr/bin/env bash
# Big: prints about 200 MB of log, then a marked last line.
set -eu
if [ "${DECREE_PRE_CHECK:-}" = "true" ]; then exit 0; fi
echo "FIRST LINE OF THE BIG LOG"
yes "a line of the big log, long enough to fill it quickly ................" | head -c 200000000
echo "THE LAST LINE OF THE BIG LOG"
`,
	// chain queues one follow-up (running edit) from the root message.
	"chain.sh": `#!/usr/bin/env bash
# Chain: the root message queues a follow-up that runs edit.
set -euo pipefail
if [ "${DECREE_PRE_CHECK:-}" = "true" ]; then exit 0; fi
if [ "${seq:-0}" = "0" ]; then
  printf -- '---\nroutine: edit\nlines: "3"\n---\nThe follow-up.\n' > .decree/outbox/next.md
fi
echo "chain step ${seq:-0}"
`,
	// fail always fails.
	"fail.sh": `#!/usr/bin/env bash
# Fail: prints a reason and exits 1.
set -euo pipefail
if [ "${DECREE_PRE_CHECK:-}" = "true" ]; then exit 0; fi
echo "boom: the stand-in failed"
exit 1
`,
	// notready fails its pre-check.
	"notready.sh": `#!/usr/bin/env bash
# Not ready: its pre-check fails.
set -euo pipefail
if [ "${DECREE_PRE_CHECK:-}" = "true" ]; then echo "the stand-in tool is missing"; exit 1; fi
echo never
`,
}

// env is a real decree-controller (with --http) and a real decree-worker,
// as separate processes, on a new project.
type env struct {
	t       *testing.T
	project string
	url     string
	ctl     *testtool.Proc
	client  decreev1.ControllerServiceClient
	http    *http.Client
}

var dashLine = regexp.MustCompile(`dashboard on (https?://\S+)`)

// startEnv starts the controller with --http 127.0.0.1:0 plus extra flags.
func startEnv(t *testing.T, extra ...string) *env {
	t.Helper()
	bin := testtool.Binaries(t)
	project := testtool.InitProject(t)
	for name, text := range routines {
		if err := os.WriteFile(filepath.Join(project, ".decree", "routines", name), []byte(text), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(project, "README.md"), []byte("# demo project\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(filepath.Join(bin, "decreectl"), "-C", project, "routine-sync").CombinedOutput(); err != nil {
		t.Fatalf("routine-sync: %v\n%s", err, out)
	}
	args := append([]string{"--project", project, "--http", "127.0.0.1:0", "--lease-ttl", "3s"}, extra...)
	cmd := exec.Command(filepath.Join(bin, "decree-controller"), args...)
	cmd.Env = testtool.CleanEnv()
	e := &env{t: t, project: project}
	e.ctl = testtool.Start(t, "decree-controller", cmd)
	testtool.WaitFor(t, 30*time.Second, "the dashboard address", func() bool {
		if m := dashLine.FindStringSubmatch(e.ctl.Out.String()); m != nil {
			e.url = strings.TrimSuffix(m[1], "/")
			return true
		}
		select {
		case <-e.ctl.Done():
			t.Fatalf("decree-controller exited: %v\n%s", e.ctl.Err(), e.ctl.Out)
		default:
		}
		return false
	})
	wk := exec.Command(filepath.Join(bin, "decree-worker"), "--controller", "unix://"+filepath.Join(project, ".decree", "decree.sock"),
		"--workspace", project, "--id", "w1")
	wk.Env = testtool.CleanEnv()
	testtool.Start(t, "decree-worker", wk)
	conn, err := dashboard.DialProject(project)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	e.client = decreev1.NewControllerServiceClient(conn)
	testtool.WaitFor(t, 30*time.Second, "the worker to connect", func() bool {
		r, err := e.client.ListWorkers(context.Background(), &decreev1.ListWorkersRequest{})
		return err == nil && len(r.GetWorkers()) == 1 && r.GetWorkers()[0].GetConnected()
	})
	jar, _ := cookiejar.New(nil)
	e.http = &http.Client{Jar: jar, Timeout: 60 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	return e
}

// submit queues a message for routine with fields through the API.
func (e *env) submit(routine string, fields ...string) string {
	e.t.Helper()
	fs := []*decreev1.Field{{Key: "routine", Value: routine}}
	for i := 0; i+1 < len(fields); i += 2 {
		fs = append(fs, &decreev1.Field{Key: fields[i], Value: fields[i+1]})
	}
	r, err := e.client.SubmitMessage(context.Background(), &decreev1.SubmitMessageRequest{Body: []byte("a task for " + routine), Fields: fs})
	if err != nil {
		e.t.Fatalf("submit %s: %v", routine, err)
	}
	return r.GetMessage().GetId()
}

// waitState waits until message id is in state.
func (e *env) waitState(id string, st decreev1.MessageState, d time.Duration) {
	e.t.Helper()
	testtool.WaitFor(e.t, d, id+" to be "+st.String(), func() bool {
		m, err := e.client.GetMessage(context.Background(), &decreev1.GetMessageRequest{Id: id})
		if err != nil {
			return false
		}
		got := m.GetMessage().GetState()
		if got != st && (got == decreev1.MessageState_MESSAGE_STATE_DONE || got == decreev1.MessageState_MESSAGE_STATE_DEAD) {
			e.t.Fatalf("%s ended %s (%s), want %s", id, got, m.GetMessage().GetDeadReason(), st)
		}
		return got == st
	})
}

// get fetches a dashboard path and returns the status and body.
func (e *env) get(path string) (int, string) {
	e.t.Helper()
	resp, err := e.http.Get(e.url + path)
	if err != nil {
		e.t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatalf("GET %s: %v", path, err)
	}
	return resp.StatusCode, string(b)
}

// post sends a form from the dashboard's own origin.
func (e *env) post(path string, form url.Values) (int, string) {
	e.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, e.url+path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", e.url)
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	resp, err := e.http.Do(req)
	if err != nil {
		e.t.Fatalf("POST %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

var csrfValue = regexp.MustCompile(`name="csrf" value="([0-9a-f]+)"`)

// csrf reads the CSRF token of a page.
func csrf(t *testing.T, page string) string {
	t.Helper()
	m := csrfValue.FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("no CSRF token in the page:\n%.2000s", page)
	}
	return m[1]
}

// peakRSSKiB is the controller's peak resident memory.
func (e *env) peakRSSKiB() int {
	return testtool.ProcStatusKiB(e.t, e.ctl.Cmd.Process.Pid, "VmHWM")
}

// setConfig appends a line to .decree/config.yml (the controller reads it
// again when it changes).
func (e *env) setConfig(line string) {
	e.t.Helper()
	f, err := os.OpenFile(filepath.Join(e.project, ".decree", "config.yml"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		e.t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString("\n" + line + "\n"); err != nil {
		e.t.Fatal(err)
	}
}

// state is a message's state now.
func (e *env) state(id string) decreev1.MessageState {
	e.t.Helper()
	m, err := e.client.GetMessage(context.Background(), &decreev1.GetMessageRequest{Id: id})
	if err != nil {
		e.t.Fatalf("get %s: %v", id, err)
	}
	return m.GetMessage().GetState()
}

// waitIdle waits until no message is running (a chain's end, after its
// last message is done, is part of the run).
func (e *env) waitIdle() {
	e.t.Helper()
	testtool.WaitFor(e.t, 30*time.Second, "the project to be idle", func() bool {
		st, err := e.client.GetStatus(context.Background(), &decreev1.GetStatusRequest{})
		return err == nil && st.GetRunning() == nil && st.GetQueued() == 0
	})
}
