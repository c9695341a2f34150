package pipeline

import (
	"encoding/json"
	"strings"

	"github.com/decreehq/decree/controller/store"
	"github.com/decreehq/decree/pkg/usage"
)

// The router's usage.
//
// A router command in Claude Code's JSON mode (`commands.router: claude
// -p --output-format json`) prints its answer inside a result object with
// the call's usage. The loop reads the answer from it, and the usage of a
// routing call made for a message is kept with the message: it is written
// to the run directory (RouterUsageFile) once the run exists and counts
// with the first attempt's usage in run.json, `decreectl cost` and
// budgets. A naming call (`run` without -m) is made before the message
// exists; its usage is not counted.

// RouterUsageFile is the run file holding the routing calls' usage.
const RouterUsageFile = "usage.router.jsonl"

// unwrapRouter returns the answer of a router's output and, for Claude's
// JSON mode, the call's usage.
func unwrapRouter(out string) (string, []usage.Record) {
	trimmed := strings.TrimSpace(out)
	if !strings.HasPrefix(trimmed, "{") {
		return out, nil
	}
	var obj struct {
		Type   string  `json:"type"`
		Result *string `json:"result"`
	}
	if json.Unmarshal([]byte(trimmed), &obj) != nil || obj.Type != "result" || obj.Result == nil {
		return out, nil
	}
	recs, _, _ := usage.Parse(usage.FromClaudeJSON, []byte(trimmed), "")
	return *obj.Result, recs
}

// noteRouterUsage keeps usage of a routing call for the running message.
func (p *Pipeline) noteRouterUsage(id string, recs []usage.Record) {
	if len(recs) == 0 || id == "" {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if r := p.running[id]; r != nil {
		r.routerUsage = append(r.routerUsage, recs...)
	}
}

// saveRouterUsage writes the routing calls' usage into the message's run.
func (p *Pipeline) saveRouterUsage(r *running, run *store.Run) {
	p.mu.Lock()
	recs := r.routerUsage
	r.routerUsage = nil
	p.mu.Unlock()
	if len(recs) == 0 {
		return
	}
	path, err := run.Path(RouterUsageFile)
	if err == nil {
		err = usage.Append(path, recs)
	}
	if err != nil {
		p.log.Warn("the router's usage was not recorded", "message", run.ID(), "err", err)
	}
}
