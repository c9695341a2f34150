// Package drivertest holds helpers shared by the driver packages' tests:
// the skip-or-fail rule for external tools and process liveness checks.
package drivertest

import (
	"bytes"
	"github.com/decreehq/decree/internal/testtool"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// RequireTool skips the test when name is not on PATH, or fails it when
// DECREE_REQUIRE_TOOLS=1 (CI) is set. It returns the tool's path.
func RequireTool(t testing.TB, name string) string {
	return testtool.Require(t, name)
}

// Alive reports whether pid is a live (non-zombie) process.
func Alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	// The state follows the parenthesised command name.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return false
	}
	return b[i+2] != 'Z' && b[i+2] != 'X'
}

// WaitDead polls until pid is gone or deadline passes, and reports whether
// it died.
func WaitDead(pid int, within time.Duration) bool {
	end := time.Now().Add(within)
	for time.Now().Before(end) {
		if !Alive(pid) {
			return true
		}
		time.Sleep(5 * time.Millisecond)
	}
	return !Alive(pid)
}

// WaitPidFile polls for a file holding a pid and returns the pid.
func WaitPidFile(t testing.TB, path string, within time.Duration) int {
	t.Helper()
	end := time.Now().Add(within)
	for time.Now().Before(end) {
		if b, err := os.ReadFile(path); err == nil && bytes.HasSuffix(b, []byte("\n")) {
			pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
			if err != nil {
				t.Fatalf("pid file %s: %v", path, err)
			}
			return pid
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("pid file %s did not appear within %s", path, within)
	return 0
}
