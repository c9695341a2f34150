package layout

import (
	"sort"
	"testing"
)

func TestControllerOwned(t *testing.T) {
	for _, tc := range []struct {
		name string
		want bool
	}{
		{"message.md", true},
		{"state.json", true},
		{"run.json", true},
		{"manifest.json", true},
		{"failure-context.md", true},
		{"inbox-before.txt", true},
		{"inbox-base.txt", true},
		{"wait-001.json", true},
		{"reply-001.md", true},
		{"replies-refused.jsonl", true},
		{"ask.try-001.json", false}, // a replica worker returns the question
		{"changes.diff", true},
		{"changes.try-002.diff", true},
		{"routine.log", true},
		{"routine.try-002.log", true},
		{"routine.try-1000.log", true},
		{"routine-2.log", true},
		{"router.log", true},
		{"hook.log", true},
		{"hook-aftereach.log", true},
		{"hook-aftereach.try-002.log", true},
		{"hook-beforeeach-3.log", true},
		{"tree-after.try-002.json", true},
		{"interrupted-1.routine.log", true},
		{"interrupted-2.papermill.log", true},
		{"usage-limit.json", true},
		{"usage.router.jsonl", true},
		{"output.ipynb", false},
		{"usage.try-001.jsonl", false}, // a replica worker returns its routine's usage file
		{"papermill.log", false},
		{"tree.json", false},
		{"tree.log", false},
		{"notes.txt", false},
		{"routine.log.bak", false},
		{".state.json.tmp-spare", true},
		{".state.json.tmp-prev", true},
		{".run.json.tmp-123456", true},
		{".hidden-notes.txt", false},
	} {
		if got := ControllerOwned(tc.name); got != tc.want {
			t.Errorf("ControllerOwned(%q) = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestLogNamesSortInAttemptOrder(t *testing.T) {
	var names []string
	for n := 1; n <= 12; n++ {
		names = append(names, LogName("routine", n))
	}
	sorted := append([]string(nil), names...)
	sort.Strings(sorted)
	for i := range names {
		if names[i] != sorted[i] {
			t.Fatalf("log names do not sort in attempt order: %v", sorted)
		}
	}
	if LogName("routine", 1) != "routine.log" || LogName("hook-aftereach", 2) != "hook-aftereach.try-002.log" {
		t.Errorf("names: %s %s", LogName("routine", 1), LogName("hook-aftereach", 2))
	}
	if AttemptDiffName(3) != "changes.try-003.diff" || DiscardedDir(1) != "discarded-followups/try-001" {
		t.Errorf("names: %s %s", AttemptDiffName(3), DiscardedDir(1))
	}
}

func TestIsMessageFile(t *testing.T) {
	for name, want := range map[string]bool{"a.md": true, ".md": false, ".a.md.tmp-1": false, ".hidden.md": false, "a.md.dead.txt": false, "a.txt": false} {
		if IsMessageFile(name) != want {
			t.Errorf("IsMessageFile(%q) != %v", name, want)
		}
	}
	if Path("/p", Inbox, "x.md") != "/p/.decree/inbox/x.md" {
		t.Error(Path("/p", Inbox, "x.md"))
	}
}
