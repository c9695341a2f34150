package driver

import (
	"fmt"
	"os"
	"regexp"
	"strings"

	"github.com/decreehq/decree/pkg/routine"
)

var identRe = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// CheckParams verifies every parameter name is an identifier usable as an
// environment variable and a Python name, so nothing from a message can
// smuggle in "X=Y" or shell syntax.
func CheckParams(routineName string, params map[string]string) error {
	for _, k := range routine.OrderedParams(params) {
		if !identRe.MatchString(k) {
			return fmt.Errorf("routine %s: parameter name %q is not a valid identifier (letters, digits and '_', not starting with a digit)", routineName, k)
		}
		if strings.IndexByte(params[k], 0) >= 0 {
			return fmt.Errorf("routine %s: parameter %s contains a NUL byte, which cannot be passed to a process", routineName, k)
		}
	}
	return nil
}

// Environ returns the environment for a routine process: the worker's own
// environment, then cfg.Env, then (when withParams) every parameter as
// NAME=VALUE. Later entries win over earlier ones.
func Environ(cfg TaskConfig, withParams bool) ([]string, error) {
	env := append(os.Environ(), cfg.Env...)
	for _, kv := range cfg.Env {
		if k, _, ok := strings.Cut(kv, "="); !ok || !identRe.MatchString(k) {
			return nil, fmt.Errorf("routine %s: extra environment entry %q is not KEY=VALUE with a valid name", cfg.Routine, kv)
		}
	}
	if withParams {
		if err := CheckParams(cfg.Routine, cfg.Params); err != nil {
			return nil, err
		}
		for _, k := range routine.OrderedParams(cfg.Params) {
			env = append(env, k+"="+cfg.Params[k])
		}
	}
	return env, nil
}
