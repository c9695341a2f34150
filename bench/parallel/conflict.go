package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/decreehq/decree/bench/internal/benchproj"
)

// conflictScenario runs two one-message chains on 2 workers with
// parallel: 2, both setting line 2 of shared.txt: chain A (sleeps
// conflictSleep, sets "av") and chain B (sleeps twice as long, sets "bv").
// Both lanes start from the same tree; A merges first, B conflicts, is
// requeued as a new chain (merge_retry_of: B) that runs on the merged tree
// and merges. It prints the events in order and checks each step.
func (p params) conflictScenario() error {
	e, err := p.start(2)
	defer e.close()
	if err != nil {
		return err
	}
	fmt.Printf("conflict scenario: 2 workers, parallel: 2; chain A sets line 2 of shared.txt to av (sleeps %s), chain B to bv (sleeps %s)\n",
		p.conflictSleep, 2*p.conflictSleep)
	load := benchproj.LoadAvg()
	start := time.Now()
	err = benchproj.Queue(e.dir, 2, func(i int) string {
		v, s := "av", p.conflictSleep
		if i == 1 {
			v, s = "bv", 2*p.conflictSleep
		}
		return fmt.Sprintf("file=c%d len=1 sleep=%g shared=%s\n", i, s.Seconds(), v)
	})
	if err != nil {
		return err
	}
	// A, B, and B's requeued run: three messages done, three chains closed.
	if err := e.waitIdle(3, 2*time.Minute); err != nil {
		return err
	}
	wall := time.Since(start)
	evs, err := readEvents(e.dir)
	if err != nil {
		return err
	}
	names := map[string]string{"2026010100000000": "A", "2026010100000001": "B"}
	retry, retryFile := "", ""
	done, _ := filepath.Glob(filepath.Join(e.dir, ".decree", "inbox", "done", "*.md"))
	for _, f := range done {
		fm := frontmatter(readFile(f))
		if of, ok := fm["merge_retry_of"]; ok {
			if of != "2026010100000001" {
				return fmt.Errorf("%s says merge_retry_of: %s, want B's chain 2026010100000001", filepath.Base(f), of)
			}
			retry, retryFile = fm["chain"], filepath.Base(f)
		}
	}
	if retry == "" {
		return fmt.Errorf("no message in done/ says merge_retry_of (with its chain)")
	}
	names[retry] = "B'"
	var steps []string
	for _, ev := range evs {
		switch ev.Kind {
		case "lane_opened", "message_done", "chain_merged", "merge_conflict", "message_dead":
		default:
			continue
		}
		who := names[ev.Chain]
		if who == "" {
			who = ev.Chain
		}
		text := ev.Text
		if len(text) > 110 {
			text = text[:110] + "..."
		}
		steps = append(steps, ev.Kind+"("+who+")")
		fmt.Printf("  +%5.2fs %-15s %-3s %s\n", ev.Time.Sub(start).Seconds(), ev.Kind, who, text)
	}
	want := []string{"chain_merged(A)", "merge_conflict(B)", "chain_merged(B')"}
	if got := subsequence(steps, want); !got {
		return fmt.Errorf("events %v do not show %v in that order", steps, want)
	}
	line2 := strings.Split(readFile(filepath.Join(e.dir, "shared.txt")), "\n")[1]
	spans, err := e.spans()
	if err != nil {
		return err
	}
	fmt.Printf("  requeued as chain %s (%s, merge_retry_of: B); messages run=%d, each once; dead=%d; shared.txt line 2=%q; wall_s=%.2f load1=%s->%s\n",
		retry, retryFile, len(spans), countMD(filepath.Join(e.dir, ".decree", "inbox", "dead")), line2, wall.Seconds(), load, benchproj.LoadAvg())
	if line2 != "bv" || len(spans) != 3 {
		return fmt.Errorf("want line 2 = bv from B's requeued run and 3 messages run")
	}
	if got := strings.Fields(readFile(filepath.Join(e.dir, "out", "c1.txt"))); len(got) != 1 || !strings.HasPrefix(got[0], retry+"-") {
		return fmt.Errorf("out/c1.txt holds %v, want only the requeued run's id (nothing of B's conflicting run applied)", got)
	}
	if _, err := os.Stat(filepath.Join(e.dir, ".decree", "runs", "2026010100000001-0", "changes.diff")); err != nil {
		return fmt.Errorf("the change of chain B is not kept in its run directory: %w", err)
	}
	fmt.Println("  result: B conflicted, nothing of it was applied, its requeued run merged: OK")
	return nil
}

// subsequence reports whether want occurs in got in order.
func subsequence(got, want []string) bool {
	i := 0
	for _, g := range got {
		if i < len(want) && g == want[i] {
			i++
		}
	}
	return i == len(want)
}

// frontmatter reads the "key: value" lines of a message's frontmatter.
func frontmatter(msg string) map[string]string {
	out := map[string]string{}
	rest, ok := strings.CutPrefix(msg, "---\n")
	if !ok {
		return out
	}
	for _, line := range strings.Split(rest, "\n") {
		if line == "---" {
			break
		}
		if k, v, ok := strings.Cut(line, ":"); ok {
			out[strings.TrimSpace(k)] = strings.Trim(strings.TrimSpace(v), `"'`)
		}
	}
	return out
}
