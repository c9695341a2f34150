// Package benchproj builds the project the pipeline and queue benchmarks
// run on: a tree of aged text files and a .decree/ with one routine that
// queues the next message of its chain until seq reaches the message's
// "last" field.
package benchproj

import (
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/decreehq/decree/pkg/layout"
)

// Routine queues "<chain>-<seq+1>.md" until seq reaches $last, then exits 0.
const Routine = `#!/usr/bin/env bash
# Bench: queue the next message of the chain until seq reaches LAST, exit 0.
set -euo pipefail
spec_file="${spec_file:-}"
message_file="${message_file:-}"
message_id="${message_id:-}"
message_dir="${message_dir:-}"
chain="${chain:-}"
seq="${seq:-}"
last="${last:-0}"
if [ "$seq" -lt "$last" ]; then
  printf -- '---\nlast: %s\n---\nnext\n' "$last" > ".decree/inbox/${chain}-$((seq + 1)).md"
fi
exit 0
`

// New creates a project in a new temporary directory (named after prefix)
// with files text files under src/, aged an hour so the checkpoint's stat
// cache may trust them as it does a real project's, and the routine Routine
// saved as routineName.sh and made the default; max_depth is maxDepth.
func New(prefix string, files, maxDepth int, routineName string) (string, error) {
	dir, err := os.MkdirTemp("", prefix)
	if err != nil {
		return "", err
	}
	rng := rand.New(rand.NewSource(1))
	old := time.Now().Add(-time.Hour)
	for i := 0; i < files; i++ {
		p := filepath.Join(dir, "src", fmt.Sprintf("d%02d", i%40), fmt.Sprintf("f%04d.txt", i))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return "", err
		}
		b := make([]byte, 512+rng.Intn(2048))
		for j := range b {
			b[j] = byte('a' + rng.Intn(26))
			if j%64 == 63 {
				b[j] = '\n'
			}
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			return "", err
		}
		if err := os.Chtimes(p, old, old); err != nil {
			return "", err
		}
	}
	for _, d := range []string{layout.Routines, layout.Done, layout.Dead, layout.Outbox} {
		if err := os.MkdirAll(layout.Path(dir, d), 0o755); err != nil {
			return "", err
		}
	}
	cfg := fmt.Sprintf("commands:\n  router: \"\"\nmax_retries: 1\nmax_depth: %d\ndefault_routine: %s\n", maxDepth, routineName)
	if err := os.WriteFile(layout.Path(dir, layout.Config), []byte(cfg), 0o644); err != nil {
		return "", err
	}
	return dir, os.WriteFile(layout.Path(dir, layout.Routines, routineName+".sh"), []byte(Routine), 0o755)
}

// Queue writes n messages into the project's inbox, each the root of a
// chain of its own and named "<chain>-0.md" (so none needs a chain
// assigned), with the given body for message i. The chain ids are in the
// past, so they never collide with chains the controller creates.
func Queue(dir string, n int, body func(i int) string) error {
	for i := 0; i < n; i++ {
		at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(i/100) * time.Second)
		chain := at.Format("20060102150405") + fmt.Sprintf("%02d", i%100)
		if err := os.WriteFile(filepath.Join(layout.Path(dir, layout.Inbox), chain+"-0.md"), []byte(body(i)), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// Settle writes what the set-up left in the page cache to disk (sync(2)),
// so that a measurement does not share the disk with the kernel writing
// back the project it just created: the routines' fsyncs would wait for it.
func Settle() { syscall.Sync() }

// LoadAvg is the 1-minute load average, printed beside every ratio ("n/a"
// where /proc is missing).
func LoadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "n/a"
	}
	if f := strings.Fields(string(b)); len(f) > 0 {
		return f[0]
	}
	return "n/a"
}
