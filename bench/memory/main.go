// Command memory measures the peak resident memory (VmHWM, from wait4's
// rusage) of decreectl running a message whose routine writes one large
// random file and fails, so that every attempt is diffed, the tree is
// reverted before the last attempt and after it, and the message is
// dead-lettered: the path a large file takes through an embedded
// controller and its local worker. The reference, measured in the same run
// on the same file, is `git add` of it (git's checkpoint of the file),
// whose peak RSS grows with the file below core.bigFileThreshold.
//
//	go build -o /tmp/decreectl ./cmd/decreectl
//	go run ./bench/memory -decreectl /tmp/decreectl -sizes 1,200,1024
//
// The goal (issue #12) is decreectl under 100 MB whatever the file size.
//
// With -scenario message it measures instead one message with a large body
// (see message.go): the peak RSS of decreectl, decree-controller and
// decree-worker, embedded, as separate processes, and with a replica
// worker, against `cat` of the same body into a file:
//
//	go build -o /tmp/decree-bin/ ./cmd/...
//	go run ./bench/memory -scenario message -bins /tmp/decree-bin -sizes 60
package main

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

const routine = `#!/usr/bin/env bash
# Writes a large random file and fails
set -euo pipefail
head -c %d /dev/urandom > big.bin
exit 1
`

func main() {
	decreectl := flag.String("decreectl", "", "decreectl binary to measure (required)")
	sizes := flag.String("sizes", "1,200", "file sizes in MB, comma-separated")
	keep := flag.Bool("keep", false, "keep the temporary projects")
	scenario := flag.String("scenario", "file", "file: a routine writes a large file; message: a large message body")
	bins := flag.String("bins", "", "directory of decreectl, decree-controller and decree-worker (scenario message)")
	modes := flag.String("modes", "embedded,separate,replica", "scenario message: embedded, separate, replica")
	flag.Parse()
	if *scenario == "message" {
		if *bins == "" {
			fmt.Fprintln(os.Stderr, "memory: -bins is required (go build -o /tmp/decree-bin/ ./cmd/...)")
			os.Exit(2)
		}
		fmt.Printf("%-8s %-9s %-18s %-12s %-12s %-8s %-10s %s\n", "body", "mode", "process", "peak RSS", "cat RSS", "ratio", "goal<100MB", "time")
		for _, mb := range parseSizes(*sizes) {
			if err := measureMessage(*bins, mb, strings.Split(*modes, ","), *keep); err != nil {
				fmt.Fprintf(os.Stderr, "memory: %d MB message: %v\n", mb, err)
				os.Exit(1)
			}
		}
		return
	}
	if *decreectl == "" {
		fmt.Fprintln(os.Stderr, "memory: -decreectl is required (go build -o /tmp/decreectl ./cmd/decreectl)")
		os.Exit(2)
	}
	fmt.Printf("%-8s %-14s %-14s %-8s %-10s %-12s %s\n", "size", "decreectl RSS", "git add RSS", "ratio", "goal<100MB", "run dir", "time")
	for _, mb := range parseSizes(*sizes) {
		if err := measure(*decreectl, mb, *keep); err != nil {
			fmt.Fprintf(os.Stderr, "memory: %d MB: %v\n", mb, err)
			os.Exit(1)
		}
	}
}

func parseSizes(sizes string) []int {
	var out []int
	for _, s := range strings.Split(sizes, ",") {
		mb, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || mb <= 0 {
			fmt.Fprintf(os.Stderr, "memory: bad size %q\n", s)
			os.Exit(2)
		}
		out = append(out, mb)
	}
	return out
}

func measure(decreectl string, mb int, keep bool) error {
	dir, err := os.MkdirTemp("", "decree-membench-")
	if err != nil {
		return err
	}
	if !keep {
		defer os.RemoveAll(dir)
	}
	proj := filepath.Join(dir, "project")
	if err := os.Mkdir(proj, 0o755); err != nil {
		return err
	}
	if _, _, err := run(proj, decreectl, "init"); err != nil {
		return fmt.Errorf("decreectl init: %w", err)
	}
	size := int64(mb) << 20
	if err := os.WriteFile(filepath.Join(proj, ".decree", "routines", "develop.sh"), fmt.Appendf(nil, routine, size), 0o755); err != nil {
		return err
	}
	start := time.Now()
	rss, out, err := run(proj, decreectl, "run", "-m", "big", "-p", "write a big file", "-v", "routine=develop")
	elapsed := time.Since(start)
	if err == nil || !strings.Contains(out, "dead-lettered") {
		return fmt.Errorf("decreectl run should fail and dead-letter the message (exit 1): %v\n%s", err, out)
	}
	runDir := du(filepath.Join(proj, ".decree", "runs"))

	// Reference: git add of a file of the same size.
	repo := filepath.Join(dir, "git")
	if err := os.Mkdir(repo, 0o755); err != nil {
		return err
	}
	if _, out, err := run(repo, "git", "init", "-q"); err != nil {
		return fmt.Errorf("git init: %v\n%s", err, out)
	}
	if _, out, err := run(repo, "bash", "-c", fmt.Sprintf("head -c %d /dev/urandom > big.bin", size)); err != nil {
		return fmt.Errorf("make the file: %v\n%s", err, out)
	}
	gitRSS, out, err := run(repo, "git", "add", "big.bin")
	if err != nil {
		return fmt.Errorf("git add: %v\n%s", err, out)
	}
	goal := "yes"
	if rss >= 100<<10 {
		goal = "NO"
	}
	fmt.Printf("%-8s %-14s %-14s %-8.2f %-10s %-12s %s\n", fmt.Sprintf("%d MB", mb), fmt.Sprintf("%.1f MB", float64(rss)/1024),
		fmt.Sprintf("%.1f MB", float64(gitRSS)/1024), float64(rss)/float64(gitRSS), goal, fmt.Sprintf("%.0f MB", float64(runDir)/(1<<20)), elapsed.Round(100*time.Millisecond))
	return nil
}

// run runs name in dir and returns its peak RSS in KiB and its output.
func run(dir, name string, args ...string) (int64, string, error) {
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "DECREE_CONTROLLER=", "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_AUTHOR_NAME=b", "GIT_AUTHOR_EMAIL=b@x", "GIT_COMMITTER_NAME=b", "GIT_COMMITTER_EMAIL=b@x")
	out, err := cmd.CombinedOutput()
	var rss int64
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		rss = ru.Maxrss
	}
	return rss, string(out), err
}

// du is the disk space used below dir, counting hard-linked files once.
func du(dir string) int64 {
	seen := map[uint64]bool{}
	var total int64
	filepath.Walk(dir, func(_ string, fi os.FileInfo, err error) error {
		if err != nil || !fi.Mode().IsRegular() {
			return nil
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			if seen[st.Ino] {
				return nil
			}
			seen[st.Ino] = true
			total += st.Blocks * 512
			return nil
		}
		total += fi.Size()
		return nil
	})
	return total
}
