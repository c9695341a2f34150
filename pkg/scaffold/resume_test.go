package scaffold

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/decreehq/decree/pkg/usagelimit"
)

// TestRoutinesResumeSession runs the generated develop and rust-develop
// routines with real bash and a stand-in for each AI tool that records its
// arguments: a retry after a usage limit (DECREE_PREVIOUS_SESSION_ID set)
// resumes that session in its first call only; a fresh attempt of claude
// prints the session id decree reads back from the log.
func TestRoutinesResumeSession(t *testing.T) {
	for _, tc := range []struct {
		tool, resumeArgs string
		freshPrints      bool
	}{
		{"claude", "--resume prev-session-1", true},
		{"opencode", "run --session prev-session-1", false},
		{"copilot", "--resume prev-session-1", false},
	} {
		for _, routine := range []string{"develop.sh", "rust-develop.sh"} {
			t.Run(tc.tool+"/"+routine, func(t *testing.T) {
				dir := t.TempDir()
				if _, err := Init(dir, Options{Tool: tc.tool}); err != nil {
					t.Fatal(err)
				}
				bin := t.TempDir()
				record := filepath.Join(t.TempDir(), "calls")
				stub := "#!/usr/bin/env bash\n# stand-in for " + tc.tool + ": records its arguments\necho \"$*\" >> " + record + "\n"
				os.WriteFile(filepath.Join(bin, tc.tool), []byte(stub), 0o755)
				// cargo stand-in: the build passes, so rust-develop calls the AI once.
				os.WriteFile(filepath.Join(bin, "cargo"), []byte("#!/usr/bin/env bash\nexit 0\n"), 0o755)
				run := func(extra ...string) (string, []string) {
					os.Remove(record)
					cmd := exec.Command("bash", ".decree/routines/"+routine)
					cmd.Dir = dir
					cmd.Env = append(os.Environ(), append([]string{"PATH=" + bin + ":" + os.Getenv("PATH"),
						"message_id=m-0", "message_file=m.md", "message_dir=" + t.TempDir(), "DECREE_PREVIOUS_SESSION_ID="}, extra...)...)
					out, err := cmd.CombinedOutput()
					if err != nil {
						t.Fatalf("%s failed: %v\n%s", routine, err, out)
					}
					calls, _ := os.ReadFile(record)
					return string(out), strings.Split(strings.TrimSpace(string(calls)), "\n")
				}
				out, calls := run("DECREE_PREVIOUS_SESSION_ID=prev-session-1")
				if !strings.Contains(calls[0], tc.resumeArgs) {
					t.Errorf("first call %q does not resume with %q", calls[0], tc.resumeArgs)
				}
				for _, c := range calls[1:] {
					if strings.Contains(c, "prev-session-1") {
						t.Errorf("a later call resumes again: %q", c)
					}
				}
				if first := strings.SplitN(out, "\n", 2)[0]; usagelimit.SessionID([]byte(first)) != "prev-session-1" {
					t.Errorf("the log does not name the resumed session first:\n%s", out)
				}
				out, calls = run()
				if strings.Contains(strings.Join(calls, "\n"), "--resume") || strings.Contains(strings.Join(calls, "\n"), "--session ") {
					t.Errorf("a fresh attempt resumes: %q", calls)
				}
				if tc.freshPrints {
					id := usagelimit.SessionID([]byte(out))
					if len(id) != 36 || !strings.Contains(calls[len(calls)-1], "--session-id "+id) {
						t.Errorf("fresh attempt: log session %q, calls %q\n%s", id, calls, out)
					}
				}
			})
		}
	}
}

// TestRoutinesRecordUsage runs the generated routines with real bash, a
// stand-in claude printing its real --output-format json result and a
// stand-in decreectl: every call picks the attempt's model
// (DECREE_ATTEMPT_VALUE), and claude's output is piped through `decreectl
// usage record --tee` when decree gave a usage file, reaching the log
// either way.
func TestRoutinesRecordUsage(t *testing.T) {
	result, err := os.ReadFile("../usage/testdata/claude-result.json")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		tool   string
		record bool // the tool's output is recorded
	}{{"claude", true}, {"opencode", false}} {
		for _, routine := range []string{"develop.sh", "rust-develop.sh"} {
			t.Run(tc.tool+"/"+routine, func(t *testing.T) {
				dir := t.TempDir()
				if _, err := Init(dir, Options{Tool: tc.tool}); err != nil {
					t.Fatal(err)
				}
				bin, state := t.TempDir(), t.TempDir()
				json := filepath.Join(state, "result.json")
				os.WriteFile(json, result, 0o644)
				os.WriteFile(filepath.Join(bin, tc.tool), []byte("#!/usr/bin/env bash\necho \"$*\" >> "+state+"/calls\ncat "+json+"\n"), 0o755)
				os.WriteFile(filepath.Join(bin, "decreectl"), []byte("#!/usr/bin/env bash\necho \"$*\" >> "+state+"/recorded\ntee -a "+state+"/piped\n"), 0o755)
				os.WriteFile(filepath.Join(bin, "cargo"), []byte("#!/usr/bin/env bash\nexit 0\n"), 0o755)
				run := func(extra ...string) string {
					for _, f := range []string{"calls", "recorded", "piped"} {
						os.Remove(filepath.Join(state, f))
					}
					cmd := exec.Command("bash", ".decree/routines/"+routine)
					cmd.Dir = dir
					cmd.Env = append(os.Environ(), append([]string{"PATH=" + bin + ":" + os.Getenv("PATH"),
						"message_id=m-0", "message_file=m.md", "message_dir=" + t.TempDir(), "DECREE_PREVIOUS_SESSION_ID=", "DECREE_USAGE_FILE=", "DECREE_ATTEMPT_VALUE="}, extra...)...)
					out, err := cmd.CombinedOutput()
					if err != nil {
						t.Fatalf("%s failed: %v\n%s", routine, err, out)
					}
					return string(out)
				}
				read := func(name string) string { b, _ := os.ReadFile(filepath.Join(state, name)); return string(b) }
				out := run("DECREE_USAGE_FILE="+filepath.Join(state, "usage.jsonl"), "DECREE_ATTEMPT_VALUE=opus", "DECREE_BUDGET_USD=0.75")
				calls := strings.Split(strings.TrimSpace(read("calls")), "\n")
				for _, c := range calls {
					if !strings.Contains(c, "--model opus") {
						t.Errorf("call %q does not pick the attempt's model", c)
					}
					if tc.record != strings.Contains(c, "--output-format json") {
						t.Errorf("call %q: JSON output %v", c, tc.record)
					}
					if tc.record != strings.Contains(c, "--max-budget-usd 0.75") {
						t.Errorf("call %q: budget flag %v", c, tc.record)
					}
				}
				if !strings.Contains(out, `"total_cost_usd":0.1234`) {
					t.Errorf("the tool's output did not reach the log:\n%s", out)
				}
				recorded := read("recorded")
				if tc.record {
					if n := strings.Count(recorded, "usage record --from claude-json --tee\n"); n != len(calls) {
						t.Errorf("%d call(s), %d recorded: %q", len(calls), n, recorded)
					}
					if strings.Count(read("piped"), `"total_cost_usd":0.1234`) != len(calls) {
						t.Errorf("decreectl did not get the output: %q", read("piped"))
					}
				} else if recorded != "" {
					t.Errorf("recorded %q for a tool without usage output", recorded)
				}
				// Outside decree: nothing recorded, no --model, output kept.
				out = run()
				if read("recorded") != "" || strings.Contains(read("calls"), "--model") || strings.Contains(read("calls"), "--max-budget-usd") || !strings.Contains(out, `"total_cost_usd"`) {
					t.Errorf("outside decree: recorded %q, calls %q\n%s", read("recorded"), read("calls"), out)
				}
			})
		}
	}
}
