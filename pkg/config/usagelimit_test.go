package config

import (
	"strings"
	"testing"
	"time"
)

func TestUsageLimitSettings(t *testing.T) {
	cfg, _, err := Parse("config.yml", []byte("usage_limit:\n  patterns:\n    - 'quota exhausted.*try again'\n  max_wait: 90m\n"))
	if err != nil {
		t.Fatal(err)
	}
	u := cfg.UsageLimit
	if u.Disabled || u.MaxWait != 90*time.Minute || len(u.Patterns) != 1 || u.Patterns[0] != "quota exhausted.*try again" {
		t.Errorf("settings = %+v", u)
	}
	def, _, err := Parse("config.yml", nil)
	if err != nil || def.UsageLimit.MaxWait != DefaultUsageLimitMaxWait || def.UsageLimit.Disabled {
		t.Errorf("defaults = %+v (%v)", def.UsageLimit, err)
	}
	off, _, err := Parse("config.yml", []byte("usage_limit:\n  enabled: false\n"))
	if err != nil || !off.UsageLimit.Disabled {
		t.Errorf("enabled: false = %+v (%v)", off.UsageLimit, err)
	}
	for _, bad := range []struct{ yml, want string }{
		{"usage_limit:\n  patterns:\n    - '(unclosed'\n", "config.yml:3: usage_limit.patterns"},
		{"usage_limit:\n  patterns: 'one'\n", "config.yml:2: usage_limit.patterns: got"},
		{"usage_limit:\n  max_wait: 10s\n", "config.yml:2: usage_limit.max_wait"},
		{"usage_limit:\n  max_wait: soon\n", "a duration of at least 1m"},
	} {
		_, _, err := Parse("config.yml", []byte(bad.yml))
		if err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%q: err = %v, want %q", bad.yml, err, bad.want)
		}
	}
}
