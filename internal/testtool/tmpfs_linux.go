package testtool

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// MountTmpfs mounts a tmpfs of size (mount's syntax: "40m") on a new
// directory and unmounts it at cleanup. It skips the test when mounting is
// not allowed here (it needs root): such tests exercise a really full disk,
// and the logic they cover has unit tests with injected faults too.
func MountTmpfs(t testing.TB, size string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "small-disk")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs here (%v: %s); this test needs root", err, strings.TrimSpace(string(out)))
	}
	t.Cleanup(func() {
		if err := unmountDetach(dir); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	return dir
}
