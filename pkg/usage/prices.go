package usage

import (
	"math"
	"sort"
	"strings"
)

// Price is what a model costs, in US dollars per million tokens.
type Price struct {
	Input      float64 `yaml:"input" json:"input"`
	Output     float64 `yaml:"output" json:"output"`
	CacheRead  float64 `yaml:"cache_read" json:"cache_read"`
	CacheWrite float64 `yaml:"cache_write" json:"cache_write"`
}

// Prices maps a model name (or the start of one: "claude-sonnet-4-5"
// prices "claude-sonnet-4-5-20250929") to its price.
type Prices map[string]Price

// PricesDate is when DefaultPrices were taken from the vendors' public
// price lists. Prices change: override them in config.yml (prices:).
const PricesDate = "2025-11-01"

// DefaultPrices are list prices of common models as of PricesDate
// (standard tier, short context). They are used only for lines that
// report tokens but no cost (Codex, Gemini, hand-written lines); Claude
// Code reports its own cost.
func DefaultPrices() Prices {
	return Prices{
		"claude-opus-4-5":       {Input: 5, Output: 25, CacheRead: 0.5, CacheWrite: 6.25},
		"claude-opus-4":         {Input: 15, Output: 75, CacheRead: 1.5, CacheWrite: 18.75},
		"claude-sonnet-4":       {Input: 3, Output: 15, CacheRead: 0.3, CacheWrite: 3.75},
		"claude-haiku-4-5":      {Input: 1, Output: 5, CacheRead: 0.1, CacheWrite: 1.25},
		"claude-3-5-haiku":      {Input: 0.8, Output: 4, CacheRead: 0.08, CacheWrite: 1},
		"gpt-5":                 {Input: 1.25, Output: 10, CacheRead: 0.125},
		"gpt-5-mini":            {Input: 0.25, Output: 2, CacheRead: 0.025},
		"gpt-5-nano":            {Input: 0.05, Output: 0.4, CacheRead: 0.005},
		"gpt-5-codex":           {Input: 1.25, Output: 10, CacheRead: 0.125},
		"gpt-4.1":               {Input: 2, Output: 8, CacheRead: 0.5},
		"o4-mini":               {Input: 1.1, Output: 4.4, CacheRead: 0.275},
		"gemini-2.5-pro":        {Input: 1.25, Output: 10, CacheRead: 0.125},
		"gemini-2.5-flash":      {Input: 0.3, Output: 2.5, CacheRead: 0.03},
		"gemini-2.5-flash-lite": {Input: 0.1, Output: 0.4, CacheRead: 0.01},
	}
}

// With returns p with over's entries added or replacing p's.
func (p Prices) With(over Prices) Prices {
	out := make(Prices, len(p)+len(over))
	for k, v := range p {
		out[strings.ToLower(k)] = v
	}
	for k, v := range over {
		out[strings.ToLower(k)] = v
	}
	return out
}

// Lookup finds a model's price: its own entry, else the longest entry
// the model name starts with, compared without case.
func (p Prices) Lookup(model string) (Price, bool) {
	m := strings.ToLower(strings.TrimSpace(model))
	if m == "" {
		return Price{}, false
	}
	if pr, ok := p[m]; ok {
		return pr, true
	}
	keys := make([]string, 0, len(p))
	for k := range p {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return len(keys[i]) > len(keys[j]) })
	for _, k := range keys {
		if strings.HasPrefix(m, strings.ToLower(k)) {
			return p[k], true
		}
	}
	return Price{}, false
}

// Estimate prices a line's tokens; false when the model is unknown.
func (p Prices) Estimate(r Record) (Dollars, bool) {
	pr, ok := p.Lookup(r.Model)
	if !ok {
		return 0, false
	}
	micro := (float64(r.InputTokens)*pr.Input + float64(r.OutputTokens)*pr.Output +
		float64(r.CacheReadTokens)*pr.CacheRead + float64(r.CacheWriteTokens)*pr.CacheWrite)
	// dollars per million tokens × tokens = micro-dollars
	return Dollars(math.Round(micro)), true
}
