// Package e2e drives decree end to end: temporary projects, real bash
// routines, small scripts standing in for the AI tools, and decreectl run
// both in-process (cli.Main) and as the built binary.
package e2e

import (
	"testing"
)

// scenario is one end-to-end story; run gets a fresh project per mode.
type scenario struct {
	name string
	run  func(t *testing.T, m mode)
}

// scenarios is the table every mode runs. The functions live in the
// scenario_*_test.go files, grouped by topic.
var scenarios = []scenario{
	// decreectl run: inputs, names, routine selection, parameters (spec 07, 06)
	{"run/spec-input-file", specInputFile},
	{"run/name-and-prompt", nameAndPrompt},
	{"run/stdin-body", stdinBody},
	{"run/router-derives-name-with-suffix", routerDerivesName},
	{"run/routine-flag-skips-router", routineFlagSkipsRouter},
	{"run/router-garbage-falls-back", routerGarbage},
	{"run/custom-params", customParams},
	{"run/routine-discovery", routineDiscovery},
	{"run/notebook-routine", notebookRoutine},

	// chains, depth, retries, process (spec 07, 04)
	{"ops/routine-sync", routineSync},
	{"chain/depth-first", depthFirst},
	{"chain/max-depth", maxDepth},
	{"retry/exhaustion-reverts", retryExhaustion},
	{"retry/second-attempt-succeeds", retrySucceeds},
	{"retry/discards-only-its-follow-ups", discardOnlyFollowUps},
	{"retry/per-routine-limits", perRoutineLimits},
	{"process/stop-on-failure", processStop},
	{"process/continue-on-failure", processContinue},

	// operations on runs
	{"ops/requeue", requeue},
	{"ops/revert", revertCommand},
	{"ops/listings", listings},
	{"hooks/env-and-dead-letter", hooks},

	// bad input
	{"bad/malformed-frontmatter", badFrontmatter},
	{"bad/unknown-routine", badUnknownRoutine},
	{"bad/routine-files", badRoutineFiles},
	{"bad/no-capable-worker", badNoCapableWorker},
	{"bad/arguments", badArguments},
	{"bad/follow-ups", badFollowUps},
	{"bad/missing-spec", badMissingSpec},
	{"bad/routine-killed-by-signal", badSignal},
}

func TestScenarios(t *testing.T) {
	for _, m := range modes {
		t.Run(string(m), func(t *testing.T) {
			t.Parallel()
			for _, sc := range scenarios {
				t.Run(sc.name, func(t *testing.T) {
					t.Parallel()
					sc.run(t, m)
				})
			}
		})
	}
}
