// Package testtool holds what decree's tests share: the rule for external
// tools (skip when missing on a developer's machine, fail in CI where
// DECREE_REQUIRE_TOOLS=1), and building decree's commands once per test
// binary for tests that run them as separate processes.
package testtool

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
)

// Require returns the path of an external tool. When it is missing the test
// is skipped, or fails when DECREE_REQUIRE_TOOLS=1 (CI), so that a suite
// never passes by testing nothing there.
func Require(t testing.TB, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		if os.Getenv("DECREE_REQUIRE_TOOLS") == "1" {
			t.Fatalf("%s is required (DECREE_REQUIRE_TOOLS=1) but not found: %v", name, err)
		}
		t.Skipf("%s not found (set DECREE_REQUIRE_TOOLS=1 to make this a failure): %v", name, err)
	}
	return p
}

// Unavailable skips the test because what it needs is missing (why), or
// fails it when DECREE_REQUIRE_TOOLS=1, like Require.
func Unavailable(t testing.TB, what string, why error) {
	t.Helper()
	if os.Getenv("DECREE_REQUIRE_TOOLS") == "1" {
		t.Fatalf("%s is required (DECREE_REQUIRE_TOOLS=1) but unavailable: %v", what, why)
	}
	t.Skipf("%s unavailable (set DECREE_REQUIRE_TOOLS=1 to make this a failure): %v", what, why)
}

// Commands are decree's programs, as module-relative package directories.
var Commands = []string{"./cmd/decreectl", "./cmd/decree-controller", "./cmd/decree-worker", "./cmd/decree-driver-tree", "./cmd/decree-supervisor"}

var (
	buildOnce sync.Once
	buildDir  string
	buildErr  error
)

// Binaries builds decree's commands once per test binary and returns the
// directory holding decreectl, decree-controller, decree-worker and the
// decree-driver-tree plugin beside them (as `make build` lays them out). Call
// Cleanup from TestMain to remove it.
func Binaries(t testing.TB) string {
	t.Helper()
	dir, err := BinariesErr()
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// BinariesErr is Binaries for callers without a testing.TB (TestMain).
func BinariesErr() (string, error) {
	buildOnce.Do(func() {
		buildDir, buildErr = os.MkdirTemp("", "decree-test-bin-")
		if buildErr != nil {
			return
		}
		args := []string{"build", "-o", buildDir + string(filepath.Separator)}
		// DECREE_TEST_BUILD_FLAGS adds flags, e.g. -race: with
		// GORACE=halt_on_error=1 a race in a controller or worker then
		// kills it and fails the test that ran it.
		args = append(args, strings.Fields(os.Getenv("DECREE_TEST_BUILD_FLAGS"))...)
		cmd := exec.Command("go", append(args, Commands...)...)
		cmd.Dir = ModuleRoot()
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build of decree's commands: %v\n%s", err, out)
		}
	})
	return buildDir, buildErr
}

// Cleanup removes the binaries Binaries built, if any.
func Cleanup() {
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
}

// ModuleRoot is the directory holding decree's go.mod.
func ModuleRoot() string {
	_, here, _, _ := runtime.Caller(0)
	return filepath.Dir(filepath.Dir(filepath.Dir(here)))
}
