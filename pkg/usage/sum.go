package usage

import "strings"

// Totals is what a set of AI calls cost: run.json's and state.json's
// "usage" object.
type Totals struct {
	// CostUSD is the whole cost, reported and estimated.
	CostUSD Dollars `json:"cost_usd"`
	// EstimatedUSD is the part of CostUSD computed from the price table.
	EstimatedUSD     Dollars `json:"estimated_cost_usd,omitempty"`
	InputTokens      int64   `json:"input_tokens"`
	OutputTokens     int64   `json:"output_tokens"`
	CacheReadTokens  int64   `json:"cache_read_tokens"`
	CacheWriteTokens int64   `json:"cache_write_tokens"`
	// Calls counts the usage lines (AI calls).
	Calls int `json:"calls"`
	// Unpriced counts calls with tokens, no cost, and a model the price
	// table does not know: their cost is missing from CostUSD.
	Unpriced int `json:"unpriced_calls,omitempty"`
	// Malformed counts skipped lines.
	Malformed int `json:"malformed_lines,omitempty"`
}

// Add adds o to t.
func (t *Totals) Add(o Totals) {
	t.CostUSD += o.CostUSD
	t.EstimatedUSD += o.EstimatedUSD
	t.InputTokens += o.InputTokens
	t.OutputTokens += o.OutputTokens
	t.CacheReadTokens += o.CacheReadTokens
	t.CacheWriteTokens += o.CacheWriteTokens
	t.Calls += o.Calls
	t.Unpriced += o.Unpriced
	t.Malformed += o.Malformed
}

// IsZero reports whether nothing was recorded.
func (t Totals) IsZero() bool { return t == Totals{} }

// Tokens is the sum of all token counts.
func (t Totals) Tokens() int64 {
	return t.InputTokens + t.OutputTokens + t.CacheReadTokens + t.CacheWriteTokens
}

// Sum adds usage lines in the order they were written, remembering the
// last value of every cumulative session (see the package doc). One Sum
// reads all attempts of a message in order.
type Sum struct {
	prices Prices
	last   map[string]Record
}

// NewSum returns a Sum pricing token-only lines with prices (nil: none).
func NewSum(prices Prices) *Sum { return &Sum{prices: prices, last: map[string]Record{}} }

// Add accounts one line and returns what it adds to the totals.
func (s *Sum) Add(r Record) Totals {
	inc := r
	if r.IsCumulative() {
		key := strings.ToLower(r.Tool) + "\x00" + r.SessionID
		if prev, ok := s.last[key]; ok && !dropped(prev, r) {
			inc = minus(r, prev)
		}
		s.last[key] = r
	}
	t := Totals{Calls: 1, InputTokens: inc.InputTokens, OutputTokens: inc.OutputTokens,
		CacheReadTokens: inc.CacheReadTokens, CacheWriteTokens: inc.CacheWriteTokens}
	switch {
	case inc.CostUSD != nil:
		t.CostUSD = *inc.CostUSD
		if r.CostSource == SourceEstimated {
			t.EstimatedUSD = t.CostUSD
		}
	case inc.hasTokens():
		if c, ok := s.prices.Estimate(inc); ok {
			t.CostUSD, t.EstimatedUSD = c, c
		} else {
			t.Unpriced = 1
		}
	}
	return t
}

// dropped reports whether a cumulative session's counters went down: the
// process restarted its count (a reset).
func dropped(prev, r Record) bool {
	if prev.CostUSD != nil && r.CostUSD != nil && *r.CostUSD < *prev.CostUSD {
		return true
	}
	return r.InputTokens < prev.InputTokens || r.OutputTokens < prev.OutputTokens ||
		r.CacheReadTokens < prev.CacheReadTokens || r.CacheWriteTokens < prev.CacheWriteTokens
}

// minus is the increment from prev to r (no counter dropped).
func minus(r, prev Record) Record {
	out := r
	out.InputTokens -= prev.InputTokens
	out.OutputTokens -= prev.OutputTokens
	out.CacheReadTokens -= prev.CacheReadTokens
	out.CacheWriteTokens -= prev.CacheWriteTokens
	if r.CostUSD != nil && prev.CostUSD != nil {
		d := *r.CostUSD - *prev.CostUSD
		out.CostUSD = &d
	}
	return out
}

// Lines sums the lines of one usage file (one attempt) into s and returns
// their totals, with malformed counted.
func (s *Sum) Lines(recs []Record, malformed int) Totals {
	var t Totals
	for _, r := range recs {
		t.Add(s.Add(r))
	}
	t.Malformed += malformed
	return t
}
