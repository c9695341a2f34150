package usage

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func read(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func dollars(f float64) *Dollars { d := FromFloat(f); return &d }

// TestParse reads what each CLI prints in its JSON mode (testdata holds
// the shapes the tools' documentation shows).
func TestParse(t *testing.T) {
	tests := []struct {
		name, format, file, model string
		want                      []Record
		warn                      bool
	}{
		{"claude json result", FromClaudeJSON, "claude-result.json", "", []Record{{Tool: "claude", Model: "claude-sonnet-4-5-20250929",
			SessionID: "5f0c1f0e-9d1c-4b6e-8a8e-2f1f7c0f6a11", InputTokens: 24, OutputTokens: 2210, CacheReadTokens: 90211, CacheWriteTokens: 8120,
			CostUSD: dollars(0.1234), CostSource: SourceReported, Cumulative: yes()}}, false},
		{"claude stream-json", FromClaudeJSON, "claude-stream.jsonl", "", []Record{{Tool: "claude", Model: "claude-opus-4-5-20251101",
			SessionID: "9a1d2c3b-0000-4000-8000-00000000beef", InputTokens: 6, OutputTokens: 310, CacheReadTokens: 4800, CacheWriteTokens: 5000,
			CostUSD: dollars(0.0421), CostSource: SourceReported, Cumulative: yes()}}, false},
		{"claude stopped by a usage limit", FromClaudeJSON, "claude-usage-limit.txt", "", nil, true},
		{"codex exec --json", FromCodexJSON, "codex-exec.jsonl", "gpt-5-codex", []Record{
			{Tool: "codex", Model: "gpt-5-codex", SessionID: "0199a213-81c0-7800-8aa1-bbab2a035a53", InputTokens: 315, CacheReadTokens: 24448, OutputTokens: 122, Cumulative: no()},
			{Tool: "codex", Model: "gpt-5-codex", SessionID: "0199a213-81c0-7800-8aa1-bbab2a035a53", InputTokens: 10000, CacheReadTokens: 20000, OutputTokens: 1000, Cumulative: no()},
		}, false},
		{"codex without usage", FromCodexJSON, "claude-usage-limit.txt", "", nil, true},
		{"gemini json", FromGeminiJSON, "gemini.json", "", []Record{
			{Tool: "gemini", Model: "gemini-2.5-flash", InputTokens: 1000, OutputTokens: 100, Cumulative: no()},
			{Tool: "gemini", Model: "gemini-2.5-pro", InputTokens: 3676, CacheReadTokens: 21263, OutputTokens: 174, Cumulative: no()},
		}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, warns, err := Parse(tc.format, read(t, tc.file), tc.model)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				g, _ := json.Marshal(got)
				w, _ := json.Marshal(tc.want)
				t.Errorf("got  %s\nwant %s", g, w)
			}
			if (len(warns) > 0) != tc.warn {
				t.Errorf("warnings %q, want some: %v", warns, tc.warn)
			}
		})
	}
	if _, _, err := Parse("cursor-json", nil, ""); err == nil || !strings.Contains(err.Error(), "claude-json") {
		t.Errorf("unknown format: %v", err)
	}
}

// TestSum adds a message's attempts as the controller does: Claude's
// running totals by increments (a restored total after --resume, then a
// reset one), a usage-limit stop that recorded nothing, Codex and Gemini
// priced from the table. Totals are exact to the micro-dollar.
func TestSum(t *testing.T) {
	lines := func(format, file, model string) []Record {
		recs, _, err := Parse(format, read(t, file), model)
		if err != nil {
			t.Fatal(err)
		}
		return recs
	}
	limited, _, _ := Parse(FromClaudeJSON, read(t, "claude-usage-limit.txt"), "")
	attempt1 := append(append(lines(FromClaudeJSON, "claude-result.json", ""), lines(FromClaudeJSON, "claude-resumed-restored.json", "")...), limited...)
	attempt2 := append(append(lines(FromClaudeJSON, "claude-resumed-reset.json", ""), lines(FromCodexJSON, "codex-exec.jsonl", "gpt-5-codex")...),
		lines(FromGeminiJSON, "gemini.json", "")...)
	s := NewSum(DefaultPrices())
	t1 := s.Lines(attempt1, 0)
	t2 := s.Lines(attempt2, 1)
	if t1.CostUSD != 200000 || t1.Calls != 2 || t1.EstimatedUSD != 0 {
		t.Errorf("attempt 1: %+v, want $0.20 (0.1234, then the restored 0.2 adds 0.0766) in 2 calls", t1)
	}
	if t1.OutputTokens != 3400 || t1.CacheReadTokens != 150000 {
		t.Errorf("attempt 1 tokens: %+v, want the session's last running totals", t1)
	}
	// Reset to $0.05 counts whole; Codex 0.00467 + 0.025; Gemini 0.008993 + 0.00055.
	want2 := Dollars(50000 + 4670 + 25000 + 8993 + 550)
	if t2.CostUSD != want2 || t2.EstimatedUSD != want2-50000 || t2.Calls != 5 || t2.Malformed != 1 {
		t.Errorf("attempt 2: %+v, want cost %d µ$ (%d estimated) in 5 calls, 1 malformed", t2, want2, want2-50000)
	}
	var total Totals
	total.Add(t1)
	total.Add(t2)
	if got := total.CostUSD.String(); got != "$0.2892" {
		t.Errorf("message total %s, want $0.2892", got)
	}
	b, _ := json.Marshal(total)
	if !strings.Contains(string(b), `"cost_usd":0.289213`) {
		t.Errorf("JSON %s", b)
	}
	var back Totals
	if err := json.Unmarshal(b, &back); err != nil || back != total {
		t.Errorf("JSON round trip: %+v, %v", back, err)
	}
}

// TestSumCounters: the counter rule line by line.
func TestSumCounters(t *testing.T) {
	c := func(session string, cost float64, out int64) Record {
		return Record{Tool: "claude", SessionID: session, CostUSD: dollars(cost), OutputTokens: out}
	}
	tests := []struct {
		name  string
		lines []Record
		want  Dollars
	}{
		{"one process", []Record{c("a", 0.5, 10)}, 500000},
		{"restored total grows", []Record{c("a", 0.5, 10), c("a", 0.8, 20)}, 800000},
		{"a drop is a reset", []Record{c("a", 0.5, 10), c("a", 0.3, 5)}, 800000},
		{"sessions apart", []Record{c("a", 0.5, 10), c("b", 0.3, 5)}, 800000},
		{"the same value again adds nothing", []Record{c("a", 0.5, 10), c("a", 0.5, 10)}, 500000},
		{"no session: summed raw", []Record{c("", 0.5, 10), c("", 0.5, 10)}, 1000000},
		{"cumulative false: summed raw", []Record{{Tool: "claude", SessionID: "a", CostUSD: dollars(0.5), Cumulative: no()},
			{Tool: "claude", SessionID: "a", CostUSD: dollars(0.5), Cumulative: no()}}, 1000000},
		{"other tools with a session: summed raw", []Record{{Tool: "codex", SessionID: "a", CostUSD: dollars(0.1)}, {Tool: "codex", SessionID: "a", CostUSD: dollars(0.1)}}, 200000},
		{"unknown model: unpriced", []Record{{Model: "mystery-1", InputTokens: 100}}, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := NewSum(DefaultPrices()).Lines(tc.lines, 0)
			if got.CostUSD != tc.want {
				t.Errorf("cost %d µ$, want %d", got.CostUSD, tc.want)
			}
		})
	}
	if got := NewSum(nil).Lines([]Record{{Model: "mystery-1", InputTokens: 100}}, 0); got.Unpriced != 1 || got.InputTokens != 100 {
		t.Errorf("unpriced line: %+v", got)
	}
}

// TestRead: malformed lines are skipped with a count and a warning, the
// others kept; a missing file has no lines.
func TestRead(t *testing.T) {
	in := `{"tool":"claude","cost_usd":0.01}

not json
{"tool":"x"}
{"input_tokens":-1}
{"cost_usd":"a lot"}
{"cost_source":"guessed","cost_usd":1}
{"output_tokens":5} {"output_tokens":6}
{"model":"gpt-5","input_tokens":1000000,"cost_source":"estimated"}
` + `{"x":"` + strings.Repeat("y", maxLine) + `"}` + "\n" + `{"cost_usd":0.02}`
	recs, bad, warns, err := Read(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 3 || bad != 7 {
		t.Fatalf("%d lines kept, %d malformed (%q); want 3 and 7", len(recs), bad, warns)
	}
	if !strings.Contains(warns[0], "line 3") || !strings.Contains(strings.Join(warns, "\n"), "neither a cost nor a token count") {
		t.Errorf("warnings %q", warns)
	}
	if *recs[2].CostUSD != 20000 {
		t.Errorf("the line after an over-long one: %+v", recs[2])
	}
	if recs, bad, _, err := ReadFile(filepath.Join(t.TempDir(), "none.jsonl")); err != nil || recs != nil || bad != 0 {
		t.Errorf("missing file: %v %d %v", recs, bad, err)
	}
}

// TestAppend writes lines that Read reads back.
func TestAppend(t *testing.T) {
	p := filepath.Join(t.TempDir(), FileName(2))
	recs, _, _ := Parse(FromClaudeJSON, read(t, "claude-result.json"), "")
	for i := 0; i < 2; i++ {
		if err := Append(p, recs); err != nil {
			t.Fatal(err)
		}
	}
	back, bad, _, err := ReadFile(p)
	if err != nil || bad != 0 || len(back) != 2 || !reflect.DeepEqual(back[1], recs[0]) {
		t.Fatalf("read back %+v, %d malformed, %v", back, bad, err)
	}
	if filepath.Base(p) != "usage.try-002.jsonl" {
		t.Errorf("FileName(2) = %s", filepath.Base(p))
	}
}

// TestPrices: the longest matching entry prices a dated model name, and
// an override wins.
func TestPrices(t *testing.T) {
	p := DefaultPrices()
	for _, tc := range []struct {
		model string
		in    float64
		ok    bool
	}{
		{"gpt-5", 1.25, true},
		{"gpt-5-mini-2025-08-07", 0.25, true},
		{"GPT-5-Codex", 1.25, true},
		{"claude-sonnet-4-5-20250929", 3, true},
		{"gemini-2.5-flash-lite", 0.1, true},
		{"mystery", 0, false},
		{"", 0, false},
	} {
		pr, ok := p.Lookup(tc.model)
		if ok != tc.ok || pr.Input != tc.in {
			t.Errorf("Lookup(%q) = %+v, %v", tc.model, pr, ok)
		}
	}
	over := p.With(Prices{"GPT-5": {Input: 2, Output: 20}})
	if c, ok := over.Estimate(Record{Model: "gpt-5", InputTokens: 1000, OutputTokens: 500}); !ok || c != 12000 {
		t.Errorf("override estimate %d, %v; want 12000 µ$", c, ok)
	}
}
