package memlimit

import (
	"runtime/debug"
	"testing"
)

func TestApply(t *testing.T) {
	old := debug.SetMemoryLimit(-1)
	defer debug.SetMemoryLimit(old)
	t.Setenv("GOMEMLIMIT", "")
	if got := Apply(); got != Default || debug.SetMemoryLimit(-1) != Default {
		t.Fatalf("Apply without GOMEMLIMIT: %d, runtime %d; want %d", got, debug.SetMemoryLimit(-1), Default)
	}
	debug.SetMemoryLimit(1 << 40)
	t.Setenv("GOMEMLIMIT", "1TiB")
	if got := Apply(); got != 1<<40 {
		t.Fatalf("Apply with GOMEMLIMIT set changed the limit to %d", got)
	}
}
