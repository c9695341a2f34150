package config

import (
	"regexp"
	"time"

	"go.yaml.in/yaml/v3"
)

// DefaultUsageLimitMaxWait caps a usage-limit wait when max_wait is unset.
const DefaultUsageLimitMaxWait = 24 * time.Hour

var usageLimitKeys = []string{"enabled", "patterns", "max_wait"}

// usageLimit reads usage_limit: enabled, patterns (valid regular
// expressions) and max_wait (a duration such as 6h, at least a minute).
func (p *parser) usageLimit(n *yaml.Node) {
	u := &p.cfg.UsageLimit
	p.each(n, "usage_limit", usageLimitKeys, func(key string, _, v *yaml.Node) {
		full := "usage_limit." + key
		switch key {
		case "enabled":
			if b, ok := p.boolean(v, full); ok {
				u.Disabled = !b
			}
		case "patterns":
			if v.Kind != yaml.SequenceNode {
				p.errorf(v, full, describe(v), "a list of regular expressions")
				return
			}
			for _, item := range v.Content {
				s, ok := p.str(item, full, "a regular expression")
				if !ok {
					continue
				}
				if _, err := regexp.Compile("(?i)" + s); err != nil {
					p.errorf(item, full, describe(item)+" ("+err.Error()+")", "a valid regular expression (RE2 syntax)")
					continue
				}
				u.Patterns = append(u.Patterns, s)
			}
		case "max_wait":
			s, ok := p.str(v, full, "a duration such as 6h or 90m")
			if !ok {
				return
			}
			d, err := time.ParseDuration(s)
			if err != nil || d < time.Minute {
				p.errorf(v, full, describe(v), "a duration of at least 1m, such as 6h or 90m")
				return
			}
			u.MaxWait = d
		}
	})
}
