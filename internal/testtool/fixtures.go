package testtool

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// SharedFixtures returns the directory ../shared/fixtures/<name> beside the
// repository (the shared folder a checkout sits next to, in CI too). Tests
// use the files there in place. When it is missing the test is skipped, or
// fails when DECREE_REQUIRE_TOOLS=1.
func SharedFixtures(t testing.TB, name string) string {
	t.Helper()
	dir := filepath.Join(filepath.Dir(ModuleRoot()), "shared", "fixtures", name)
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		if os.Getenv("DECREE_REQUIRE_TOOLS") == "1" {
			t.Fatalf("shared fixtures %s are required (DECREE_REQUIRE_TOOLS=1) but missing: %v", dir, err)
		}
		t.Skipf("shared fixtures %s not found (set DECREE_REQUIRE_TOOLS=1 to make this a failure): %v", dir, err)
	}
	return dir
}

// Inode returns the inode number of the file at p.
func Inode(t testing.TB, p string) uint64 {
	t.Helper()
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Sys().(*syscall.Stat_t).Ino
}
