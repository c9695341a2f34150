package engine

import (
	"encoding/json"
	"strings"

	"github.com/decreehq/decree/pkg/usage"
)

// usageEnv is where the attempt's usage file is named (see pkg/usage).
const usageEnv = "DECREE_USAGE_FILE"

// unwrap reads a CLI answer printed in Claude Code's JSON mode (`claude -p
// ... --output-format json`, the default CLAUDE template): the answer is
// the result object's "result", and the call's usage (tokens, cost,
// session) is appended to the attempt's usage file, so a tree's AI calls
// count in run.json, `decreectl cost` and budgets like a routine's. Other
// output is returned as it is.
func (r *runner) unwrap(out string) string {
	trimmed := strings.TrimSpace(out)
	if !strings.HasPrefix(trimmed, "{") {
		return out
	}
	var obj struct {
		Type   string  `json:"type"`
		Result *string `json:"result"`
	}
	if json.Unmarshal([]byte(trimmed), &obj) != nil || obj.Type != "result" || obj.Result == nil {
		return out
	}
	if path := r.env(usageEnv); path != "" {
		recs, warns, err := usage.Parse(usage.FromClaudeJSON, []byte(trimmed), "")
		for _, w := range warns {
			r.logf("\n--- usage: %s\n", w)
		}
		if err == nil && len(recs) > 0 {
			if err := usage.Append(path, recs); err != nil {
				r.say("the call's usage was not recorded: %v", err)
			}
		}
	}
	return *obj.Result
}

// env returns the value of key in the engine's environment for CLIs.
func (r *runner) env(key string) string {
	for i := len(r.o.Env) - 1; i >= 0; i-- {
		if k, v, ok := strings.Cut(r.o.Env[i], "="); ok && k == key {
			return v
		}
	}
	return ""
}
