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
// SIGQUIT ignored), under nohup (SIGHUP) or from a program that ignores
// SIGPIPE. So `yes | head -1` ends yes by SIGPIPE (141) without a
// "Broken pipe" message, and Ctrl-C reaches the routine's tools.
func TestRoutineStartsWithDefaultSignals(t *testing.T) {
	testtool.Require(t, "bash")
	for _, tc := range []struct {
		name string
		// ignore lists the signals the worker starts with ignored.
		ignore string
	}{
		{"worker with default signals", ""},
		{"worker started with signals ignored", "INT QUIT HUP PIPE TTIN TTOU TERM USR1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			cmd := exec.Command("bash", "-c", fmt.Sprintf(`trap '' %s; exec "$0"`, tc.ignore), os.Args[0])
			if tc.ignore == "" {
				cmd = exec.Command(os.Args[0])
			}
			startHelper(t, cmd, signalProbe(dir))
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
