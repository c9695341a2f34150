package merge

import (
	"fmt"
	"math/rand"
	"os"
	"strconv"
	"strings"
	"testing"
)

// randomText is a file of n lines: numbered lines ("line 17"), with one
// in every lines repeated from a small set ("", "}", "end") as real code
// repeats blank lines and braces.
func randomText(r *rand.Rand, n, every int) []string {
	out := make([]string, n)
	for i := range out {
		if r.Intn(every) == 0 {
			out[i] = []string{"", "}", "end"}[r.Intn(3)] + "\n"
		} else {
			out[i] = fmt.Sprintf("line %d\n", i+1)
		}
	}
	return out
}

// edit applies a few random edits to lines: replace, delete or insert a
// run of lines, with new text (tagged with side so the two sides'
// insertions differ) or text from the repeated set.
func edit(r *rand.Rand, lines []string, side string) []string {
	out := append([]string(nil), lines...)
	for k := r.Intn(4); k >= 0; k-- {
		at := r.Intn(len(out) + 1)
		n := min(r.Intn(3)+1, len(out)-at)
		var repl []string
		for m := r.Intn(3); m > 0; m-- {
			if r.Intn(4) == 0 {
				repl = append(repl, []string{"", "}", "end"}[r.Intn(3)]+"\n")
			} else {
				repl = append(repl, fmt.Sprintf("%s %d\n", side, r.Intn(1000)))
			}
		}
		switch r.Intn(3) {
		case 0: // insert
			n = 0
		case 1: // delete
			repl = nil
		}
		out = append(out[:at], append(repl, out[at+n:]...)...)
	}
	return out
}

// ending changes how a text ends or its line endings, sometimes: no final
// newline, or CRLF lines.
func ending(r *rand.Rand, lines []string) []byte {
	s := strings.Join(lines, "")
	switch r.Intn(8) {
	case 0:
		s = strings.TrimSuffix(s, "\n")
	case 1:
		s = strings.ReplaceAll(s, "\n", "\r\n")
	}
	return []byte(s)
}

// TestTreesMatchGitRandomly is a randomized property test with `git merge-file`
// as the oracle: for random bases and random edits on both sides (often
// the same edit on both, often touching edits), Trees reaches git's
// verdict, and the same bytes when clean. DECREE_MERGE_SEED replays one
// seed; DECREE_MERGE_RUNS sets how many inputs are tried.
func TestTreesMatchGitRandomly(t *testing.T) {
	orc := newOracle(t)
	runs := 1000
	if testing.Short() {
		runs = 200
	}
	if s := os.Getenv("DECREE_MERGE_RUNS"); s != "" {
		runs, _ = strconv.Atoi(s)
	}
	seeds := make([]int64, runs)
	for i := range seeds {
		seeds[i] = int64(i + 1)
	}
	if s := os.Getenv("DECREE_MERGE_SEED"); s != "" {
		seed, _ := strconv.ParseInt(s, 10, 64)
		seeds = []int64{seed}
	}
	clean, conflicted := 0, 0
	for _, seed := range seeds {
		r := rand.New(rand.NewSource(seed))
		// Mostly short files with a few repeated lines; some with half
		// their lines repeated, where many diffs are equally short and
		// only git's choices decide.
		base := randomText(r, r.Intn(30), 5)
		if seed%4 == 0 {
			base = randomText(r, r.Intn(120), 2)
		}
		ours := edit(r, base, "ours")
		theirs := edit(r, base, "theirs")
		switch r.Intn(4) {
		case 0: // theirs makes ours' change and one more
			theirs = edit(r, ours, "theirs")
		case 1: // same change on both sides
			theirs = ours
		}
		b := ending(r, base)
		o, th := ending(r, ours), ending(r, theirs)
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			if orc.check(t, b, o, th) {
				clean++
			} else {
				conflicted++
			}
		})
	}
	// The generator must exercise both outcomes, or the test proves little.
	if len(seeds) > 50 && (clean < len(seeds)/10 || conflicted < len(seeds)/10) {
		t.Fatalf("generator is lopsided: %d clean, %d conflicted merges", clean, conflicted)
	}
	t.Logf("%d clean, %d conflicted merges agree with git", clean, conflicted)
}
