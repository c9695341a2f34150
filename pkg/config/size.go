package config

import (
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// DefaultMaxLogBytes is the default of max_log_bytes: the most bytes one
// log (a stream of one attempt) keeps. A log over it keeps its tail, after
// a notice line saying how much was dropped.
const DefaultMaxLogBytes = 64 << 20

// MinLogBytes is the smallest max_log_bytes accepted (besides 0, no limit).
const MinLogBytes = 4 << 10

var sizeUnits = []struct {
	suffix string
	mult   int64
}{
	{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30},
	{"KB", 1000}, {"MB", 1000 * 1000}, {"GB", 1000 * 1000 * 1000},
	{"K", 1 << 10}, {"M", 1 << 20}, {"G", 1 << 30}, {"B", 1},
}

// parseSize reads a byte count: a whole number, or one with a unit
// (64MiB, 500KB, 1G; K/M/G are binary).
func parseSize(s string) (int64, bool) {
	s = strings.TrimSpace(s)
	mult := int64(1)
	for _, u := range sizeUnits {
		if rest, ok := strings.CutSuffix(s, u.suffix); ok {
			s, mult = strings.TrimSpace(rest), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 || n > (1<<62)/mult {
		return 0, false
	}
	return n * mult, true
}

// logBytes reads max_log_bytes: 0 (no limit) or at least MinLogBytes.
func (p *parser) logBytes(n *yaml.Node, key string) (int64, bool) {
	const allowed = "0 (no limit) or a size of at least 4KiB, such as 67108864, 64MiB or 500MB"
	if n.Kind != yaml.ScalarNode || n.ShortTag() == "!!bool" {
		p.errorf(n, key, describe(n), allowed)
		return 0, false
	}
	v, ok := parseSize(n.Value)
	if !ok || (v != 0 && v < MinLogBytes) {
		p.errorf(n, key, describe(n), allowed)
		return 0, false
	}
	return v, true
}
