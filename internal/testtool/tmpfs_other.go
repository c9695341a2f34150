//go:build !linux

package testtool

import "testing"

// MountTmpfs skips: mounting a small tmpfs needs Linux (and root).
func MountTmpfs(t testing.TB, size string) string {
	t.Helper()
	t.Skip("mounting a tmpfs needs Linux")
	return ""
}
