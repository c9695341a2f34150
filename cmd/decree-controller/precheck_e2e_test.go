package main

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"
)

// A pre-check runs on a worker, not in the controller: here a replica
// worker on another workspace, which syncs the project first, runs the
// routine with DECREE_PRE_CHECK=true and returns its output as the reason.
func TestPreCheckOnReplicaWorker(t *testing.T) {
	e := newEnv(t)
	probe := "#!/usr/bin/env bash\n# Probe\nset -euo pipefail\n" +
		"if [ \"${DECREE_PRE_CHECK:-}\" = true ]; then\n" +
		"  [ -f ready-flag ] || { echo \"no ready-flag in $PWD\"; exit 1; }\n  exit 0\nfi\necho worked > worked.txt\n"
	if err := os.WriteFile(filepath.Join(e.project, ".decree", "routines", "probe.sh"), []byte(probe), 0o755); err != nil {
		t.Fatal(err)
	}
	addr := e.tlsController()
	remote := []string{"--controller", addr, "--tls-ca", e.caFile, "--token-file", e.clientTF}
	ctx := timeout(t, 2*time.Minute)

	// No worker yet: the checks fail after a short grace instead of waiting.
	code, out, errOut := e.ctl(ctx, nil, append(remote, "routines", "--check")...)
	if code != 3 || !regexp.MustCompile(`(?m)^probe +FAIL: no worker can run routine probe: no worker is connected`).MatchString(out) {
		t.Fatalf("routines --check without a worker: exit %d\n%s%s", code, out, errOut)
	}

	ws := filepath.Join(e.dir, "replica-ws")
	if err := os.MkdirAll(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	e.start("decree-worker", nil, "--controller", addr, "--tls-ca", e.caFile, "--token-file", e.workerTF,
		"--workspace", ws, "--id", "replica-1")
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(100 * time.Millisecond) {
		if _, w, _ := e.ctl(ctx, nil, append(remote, "workers", "-o", "json")...); regexp.MustCompile(`"connected":\s*true`).MatchString(w) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the replica worker never connected")
		}
	}
	code, out, errOut = e.ctl(ctx, nil, append(remote, "routines", "--check")...)
	wsReal, _ := filepath.EvalSymlinks(ws)
	if code != 3 || !regexp.MustCompile(`(?m)^probe +FAIL: no ready-flag in (`+regexp.QuoteMeta(ws)+`|`+regexp.QuoteMeta(wsReal)+`)$`).MatchString(out) {
		t.Fatalf("routines --check: exit %d, want 3 and probe failing in the worker's workspace %s\n%s%s", code, ws, out, errOut)
	}
	// The flag reaches the replica with the next sync.
	if err := os.WriteFile(filepath.Join(e.project, "ready-flag"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut = e.ctl(ctx, nil, append(remote, "routines", "--check")...)
	if !regexp.MustCompile(`(?m)^probe +PASS$`).MatchString(out) {
		t.Fatalf("routines --check after the fix: exit %d\n%s%s", code, out, errOut)
	}
	for _, dir := range []string{e.project, ws} {
		if _, err := os.Stat(filepath.Join(dir, "worked.txt")); err == nil {
			t.Errorf("the routine's work ran during its pre-check (in %s)", dir)
		}
	}
}
