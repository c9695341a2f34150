package config

import (
	"math"
	"strconv"
	"strings"

	"github.com/decreehq/decree/pkg/usage"
	"go.yaml.in/yaml/v3"
)

// Cost settings.
//
// routines.<name>.max_cost_usd caps what one message may cost with that
// routine, all its attempts together; a message's own max_cost_usd
// (frontmatter) wins when lower. routines.<name>.attempts lists one value
// per attempt (attempts: [haiku, sonnet, opus]); its length is the
// number of attempts, so giving max_retries too with another number is an
// error. prices: adds to or replaces entries of the built-in price table,
// in US dollars per million tokens:
//
//	prices:
//	  gpt-5: {input: 1.25, output: 10, cache_read: 0.125}

// RoutineBudget returns the routine's max_cost_usd (project registry,
// else shared; 0 when none).
func (c *Config) RoutineBudget(routine string) float64 {
	if f := c.RoutineSettingsFor(routine, false).MaxCostUSD; f > 0 {
		return f
	}
	return c.RoutineSettingsFor(routine, true).MaxCostUSD
}

// AttemptValuesFor returns the routine's attempts list (project
// registry, else shared; nil when none).
func (c *Config) AttemptValuesFor(routine string) []string {
	if v := c.RoutineSettingsFor(routine, false).Attempts; len(v) > 0 {
		return v
	}
	return c.RoutineSettingsFor(routine, true).Attempts
}

// PriceTable is the built-in price table with config's prices applied.
func (c *Config) PriceTable() usage.Prices { return usage.DefaultPrices().With(c.Prices) }

var priceKeys = []string{"input", "output", "cache_read", "cache_write"}

// dollars reads an amount of dollars above 0.
func (p *parser) dollars(n *yaml.Node, key string) (float64, bool) {
	return p.amount(n, key, "an amount of US dollars above 0, such as 2.50", false)
}

// amount reads a finite number, above 0 or (zero) 0 or more.
func (p *parser) amount(n *yaml.Node, key, allowed string, zero bool) (float64, bool) {
	if n.Kind != yaml.ScalarNode || (n.ShortTag() != "!!int" && n.ShortTag() != "!!float") {
		p.errorf(n, key, describe(n), allowed)
		return 0, false
	}
	f, err := strconv.ParseFloat(n.Value, 64)
	if err != nil || f < 0 || (f == 0 && !zero) || math.IsInf(f, 0) || math.IsNaN(f) {
		p.errorf(n, key, describe(n), allowed)
		return 0, false
	}
	return f, true
}

// attemptValues reads a routine's attempts list.
func (p *parser) attemptValues(n *yaml.Node, key string) []string {
	const allowed = "a list of one value per attempt, such as [haiku, sonnet, opus]"
	if n.Kind != yaml.SequenceNode || len(n.Content) == 0 {
		p.errorf(n, key, describe(n), allowed)
		return nil
	}
	var out []string
	for _, item := range n.Content {
		s, ok := p.str(item, key, allowed)
		if !ok {
			return nil
		}
		if strings.ContainsAny(s, ",\n\x00") {
			p.errorf(item, key, describe(item), "values without commas or line breaks")
			return nil
		}
		out = append(out, s)
	}
	return out
}

// checkAttempts refuses max_retries that contradicts the attempts list.
func (p *parser) checkAttempts(s RoutineSettings, retries, attempts *yaml.Node, where string) {
	if len(s.Attempts) == 0 {
		return
	}
	for _, n := range []*yaml.Node{retries, attempts} {
		if n != nil && n.Value != strconv.Itoa(len(s.Attempts)) {
			p.errorf(n, where+".max_retries", n.Value, "nothing, or the length of "+where+".attempts ("+strconv.Itoa(len(s.Attempts))+"): the attempts list sets the number of attempts")
			return
		}
	}
}

// prices reads prices: model -> {input, output, cache_read, cache_write}.
func (p *parser) prices(n *yaml.Node) {
	p.each(n, "prices", nil, func(model string, _, v *yaml.Node) {
		where := "prices." + model
		var pr usage.Price
		p.each(v, where, priceKeys, func(key string, _, fv *yaml.Node) {
			f, ok := p.price(fv, where+"."+key)
			if !ok {
				return
			}
			switch key {
			case "input":
				pr.Input = f
			case "output":
				pr.Output = f
			case "cache_read":
				pr.CacheRead = f
			case "cache_write":
				pr.CacheWrite = f
			}
		})
		if p.cfg.Prices == nil {
			p.cfg.Prices = usage.Prices{}
		}
		p.cfg.Prices[strings.ToLower(model)] = pr
	})
}

func (p *parser) price(n *yaml.Node, key string) (float64, bool) {
	return p.amount(n, key, "US dollars per million tokens, 0 or more, such as 1.25", true)
}
