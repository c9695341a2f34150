package ignore

import (
	"os"
	"os/exec"
	"testing"
)

// requireTool skips the test when an external tool is missing, unless
// DECREE_REQUIRE_TOOLS=1 (CI), where a missing tool is a failure.
func requireTool(t testing.TB, name string) {
	t.Helper()
	if _, err := exec.LookPath(name); err != nil {
		if os.Getenv("DECREE_REQUIRE_TOOLS") == "1" {
			t.Fatalf("%s is required (DECREE_REQUIRE_TOOLS=1) but not found: %v", name, err)
		}
		t.Skipf("%s not installed: %v", name, err)
	}
}
