package supervisor

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/decreehq/decree/internal/testtool"
)

// waitSpare waits until a spare supervisor waits for a request and
// returns its pid.
func waitSpare(t *testing.T) int {
	t.Helper()
	var pid int
	testtool.WaitFor(t, 10*time.Second, "a spare supervisor", func() bool {
		spares.mu.Lock()
		defer spares.mu.Unlock()
		if spares.next != nil {
			pid = spares.next.cmd.Process.Pid
		}
		return pid != 0
	})
	return pid
}

// After a Start, the next supervisor is started ahead of need and serves
// the next Start with the routine's own output pipe, passed with the
// request; a spare killed while it waits (kill -9) is replaced, and the
// Start after it still runs the routine.
func TestSpareSupervisors(t *testing.T) {
	testtool.Require(t, "bash")
	run := func(word string) (int, string) {
		t.Helper()
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		p, err := Start(Spec{Path: "/bin/bash", Args: []string{"-c", "echo " + word + "; echo err-" + word + " >&2"}, Env: os.Environ(), Stdout: w, Stderr: w, Grace: time.Second})
		w.Close()
		if err != nil {
			t.Fatal(err)
		}
		out, _ := io.ReadAll(r) // end-of-file once the whole tree is gone
		if st, err := p.Wait(); err != nil || st.ExitStatus() != 0 {
			t.Fatalf("%s: status %v, %v", word, st, err)
		}
		return p.SupervisorPid(), string(out)
	}
	run("first")
	spare := waitSpare(t)
	sup, out := run("second")
	if sup != spare {
		t.Errorf("the second routine ran under supervisor %d, not the spare %d", sup, spare)
	}
	if out != "second\nerr-second\n" {
		t.Errorf("output through the spare = %q", out)
	}

	killed := waitSpare(t)
	if err := syscall.Kill(killed, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	testtool.WaitFor(t, 10*time.Second, "the killed spare to die", func() bool { return gone(killed) })
	sup, out = run("third")
	if sup == killed || !strings.HasPrefix(out, "third\n") {
		t.Errorf("after the spare was killed: supervisor %d (killed %d), output %q", sup, killed, out)
	}
}

// TestProgramBeside: the small supervisor program beside the executable
// is used only when it answers with this package's protocol.
func TestProgramBeside(t *testing.T) {
	for _, tc := range []struct {
		name, script string
		want         bool
	}{
		{"same protocol", "#!/bin/sh\necho " + Protocol + "\n", true},
		{"another protocol", "#!/bin/sh\necho decree-attempt-supervisor/0\n", false},
		{"broken", "#!/bin/sh\nexit 3\n", false},
		{"missing", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			sibling := filepath.Join(dir, "decree-supervisor")
			if tc.script != "" {
				if err := os.WriteFile(sibling, []byte(tc.script), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			got := programBeside(filepath.Join(dir, "decree-worker"))
			if want := map[bool]string{true: sibling, false: selfExe}[tc.want]; got != want {
				t.Errorf("programBeside = %s, want %s", got, want)
			}
		})
	}
}
