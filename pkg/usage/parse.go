package usage

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"sort"
)

// Formats of AI CLI output the parsers read.
const (
	FromClaudeJSON = "claude-json" // claude -p --output-format json (or stream-json)
	FromCodexJSON  = "codex-json"  // codex exec --json
	FromGeminiJSON = "gemini-json" // gemini -p … --output-format json
)

// Formats lists the formats Parse accepts.
var Formats = []string{FromClaudeJSON, FromCodexJSON, FromGeminiJSON}

// Parse turns what an AI CLI printed in one of its JSON modes into usage
// lines. It never fails on what the tool printed: output without usage
// (a tool stopped by a usage limit prints no result) yields no lines and
// a warning. model fills lines that name none (Codex does not print its
// model).
func Parse(format string, out []byte, model string) ([]Record, []string, error) {
	var recs []Record
	var warns []string
	switch format {
	case FromClaudeJSON:
		recs, warns = parseClaude(out)
	case FromCodexJSON:
		recs, warns = parseCodex(out)
	case FromGeminiJSON:
		recs, warns = parseGemini(out)
	default:
		return nil, nil, fmt.Errorf("unknown usage format %q; use one of %v", format, Formats)
	}
	for i := range recs {
		if recs[i].Model == "" {
			recs[i].Model = model
		}
	}
	return recs, warns, nil
}

// objects returns the JSON objects in out: one per line (JSON lines,
// stream modes), or one object spread over many lines (pretty-printed);
// other text is skipped.
func objects(out []byte) []map[string]json.RawMessage {
	var objs []map[string]json.RawMessage
	for _, line := range bytes.Split(out, []byte("\n")) {
		line = bytes.TrimSpace(line)
		if len(line) == 0 || line[0] != '{' {
			continue
		}
		var m map[string]json.RawMessage
		if json.Unmarshal(line, &m) == nil {
			objs = append(objs, m)
		}
	}
	if len(objs) > 0 {
		return objs
	}
	// One pretty-printed object: decode from the first '{'.
	if i := bytes.IndexByte(out, '{'); i >= 0 {
		dec := json.NewDecoder(bytes.NewReader(out[i:]))
		for {
			var m map[string]json.RawMessage
			if err := dec.Decode(&m); err != nil {
				break
			}
			objs = append(objs, m)
		}
	}
	return objs
}

func str(m map[string]json.RawMessage, key string) string {
	var s string
	_ = json.Unmarshal(m[key], &s)
	return s
}

func tokens(raw json.RawMessage) map[string]float64 {
	var m map[string]any
	_ = json.Unmarshal(raw, &m)
	out := map[string]float64{}
	for k, v := range m {
		if f, ok := v.(float64); ok {
			out[k] = f
		}
	}
	return out
}

func yes() *bool { b := true; return &b }
func no() *bool  { b := false; return &b }

// parseClaude reads Claude Code's result object(s): total_cost_usd (a
// per-process running total, so the line is cumulative), usage, and the
// model with the largest share of modelUsage.
func parseClaude(out []byte) ([]Record, []string) {
	var recs []Record
	for _, m := range objects(out) {
		if str(m, "type") != "result" {
			continue
		}
		r := Record{Tool: "claude", SessionID: str(m, "session_id"), CostSource: SourceReported, Cumulative: yes()}
		var cost *float64
		if json.Unmarshal(m["total_cost_usd"], &cost) == nil && cost != nil {
			d := FromFloat(*cost)
			r.CostUSD = &d
		}
		u := tokens(m["usage"])
		r.InputTokens = int64(u["input_tokens"])
		r.OutputTokens = int64(u["output_tokens"])
		r.CacheReadTokens = int64(u["cache_read_input_tokens"])
		r.CacheWriteTokens = int64(u["cache_creation_input_tokens"])
		var models map[string]map[string]any
		if json.Unmarshal(m["modelUsage"], &models) == nil && len(models) > 0 {
			names := make([]string, 0, len(models))
			for n := range models {
				names = append(names, n)
			}
			sort.Strings(names)
			best, bestCost := "", -1.0
			for _, n := range names {
				c, _ := models[n]["costUSD"].(float64)
				if c > bestCost {
					best, bestCost = n, c
				}
			}
			r.Model = best
		}
		if r.Check() != nil {
			continue
		}
		recs = append(recs, r)
	}
	if len(recs) == 0 {
		return nil, []string{"claude printed no result with usage (stopped before the end, such as at a usage limit?); nothing recorded for this call"}
	}
	return recs, nil
}

// parseCodex reads codex exec --json events: thread.started names the
// session, every turn.completed carries that turn's usage, whose
// input_tokens include cached_input_tokens.
func parseCodex(out []byte) ([]Record, []string) {
	var recs []Record
	session := ""
	for _, m := range objects(out) {
		switch str(m, "type") {
		case "thread.started":
			session = str(m, "thread_id")
		case "turn.completed":
			u := tokens(m["usage"])
			if r, ok := cachedInside("codex", "", session, u["input_tokens"], u["cached_input_tokens"], u["output_tokens"]); ok {
				recs = append(recs, r)
			}
		}
	}
	if len(recs) == 0 {
		return nil, []string{"codex printed no turn.completed event with usage; nothing recorded for this call"}
	}
	return recs, nil
}

// parseGemini reads gemini's JSON output: stats.models.<model>.tokens,
// where prompt includes cached and thoughts are billed as output.
func parseGemini(out []byte) ([]Record, []string) {
	var recs []Record
	for _, m := range objects(out) {
		var stats struct {
			Models map[string]struct {
				Tokens map[string]float64 `json:"tokens"`
			} `json:"models"`
		}
		if json.Unmarshal(m["stats"], &stats) != nil || len(stats.Models) == 0 {
			continue
		}
		session := str(m, "session_id")
		if session == "" {
			session = str(m, "sessionId")
		}
		names := make([]string, 0, len(stats.Models))
		for n := range stats.Models {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			t := stats.Models[n].Tokens
			if r, ok := cachedInside("gemini", n, session, t["prompt"], t["cached"], t["candidates"]+t["thoughts"]); ok {
				recs = append(recs, r)
			}
		}
	}
	if len(recs) == 0 {
		return nil, []string{"gemini printed no stats.models with tokens; nothing recorded for this call"}
	}
	return recs, nil
}

// cachedInside is a line of a tool whose input count includes the
// cached input (OpenAI's and Google's sense): the cached part is split
// off. False when the line holds no tokens.
func cachedInside(tool, model, session string, input, cached, output float64) (Record, bool) {
	r := Record{Tool: tool, Model: model, SessionID: session, Cumulative: no(),
		InputTokens: max(int64(input)-int64(cached), 0), CacheReadTokens: int64(cached), OutputTokens: int64(output)}
	return r, r.Check() == nil
}

// ReadAll reads r whole for Parse (at most 64 MiB).
func ReadAll(r io.Reader) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, 64<<20))
	if err != nil {
		return b, fmt.Errorf("read the AI tool's output: %w", err)
	}
	return b, nil
}
