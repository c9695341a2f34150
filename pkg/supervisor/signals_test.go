//go:build linux

package supervisor

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/decreehq/decree/internal/testtool"
)

// signalProbe is a routine that records its signal state and what a
// broken pipe does to it in dir/probe: the SigIgn and SigBlk lines of a
// child's /proc status, the exit status of the writer of a pipe whose
// reader left (141 = killed by SIGPIPE), and what that writer printed.
func signalProbe(dir string) string {
	return fmt.Sprintf(`grep -E '^Sig(Ign|Blk):' /proc/self/status > %[1]s/probe.tmp
yes 2>> %[1]s/probe.tmp | head -1 > /dev/null
echo "pipe: ${PIPESTATUS[0]}" >> %[1]s/probe.tmp
mv %[1]s/probe.tmp %[1]s/probe`, dir)
}

const wantProbe = "SigBlk:\t0000000000000000\nSigIgn:\t0000000000000000\npipe: 141\n"

// Every routine starts with every signal at its default disposition and
// none blocked, whatever the supervisor ignores for itself and whatever
// decree inherited: started in the background by a script (SIGINT and
// SIGQUIT ignored), under nohup (SIGHUP), from a program that ignores
// SIGPIPE or one that blocks signals. So `yes | head -1` ends yes by SIGPIPE (141) without a
// "Broken pipe" message, and Ctrl-C reaches the routine's tools.
func TestRoutineStartsWithDefaultSignals(t *testing.T) {
	testtool.Require(t, "bash")
	for _, tc := range []struct {
		name string
		// launch starts the test binary as the worker.
		launch func(t *testing.T, bin string) *exec.Cmd
	}{
		{"worker with default signals", func(_ *testing.T, bin string) *exec.Cmd { return exec.Command(bin) }},
		{"worker started with signals ignored", func(_ *testing.T, bin string) *exec.Cmd {
			return exec.Command("bash", "-c", `trap '' INT QUIT HUP PIPE TTIN TTOU TERM USR1; exec "$0"`, bin)
		}},
		{"worker started with signals blocked", func(t *testing.T, bin string) *exec.Cmd {
			// bash cannot block signals; python3 can, and exec keeps the mask.
			testtool.Require(t, "python3")
			return exec.Command("python3", "-c", `import os, signal, sys
signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM, signal.SIGUSR1, signal.SIGPIPE})
os.execv(sys.argv[1], sys.argv[1:])`, bin)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			startHelper(t, tc.launch(t, os.Args[0]), signalProbe(dir))
			var got []byte
			testtool.WaitFor(t, 20*time.Second, "the routine's signal probe", func() bool {
				var err error
				got, err = os.ReadFile(filepath.Join(dir, "probe"))
				return err == nil
			})
			if string(got) != wantProbe {
				t.Errorf("the routine's signal state:\n%s\nwant:\n%s", got, wantProbe)
			}
			if strings.Contains(string(got), "Broken pipe") {
				t.Errorf("a broken pipe printed a message: %s", got)
			}
		})
	}
}
