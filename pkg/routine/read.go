package routine

import (
	"fmt"
	"os"
	"sort"

	"github.com/decreehq/decree/pkg/tree"
)

// read returns the routine file's content.
func (r Routine) read() ([]byte, error) {
	b, err := os.ReadFile(r.Path)
	if err != nil {
		return nil, fmt.Errorf("read routine %s: %w", r.Name, err)
	}
	return b, nil
}

// Description returns the routine's description for the router prompt and
// listings: the header comment block of a shell script, the first markdown
// cell of a notebook, the title and first prompt of a decision tree.
func (r Routine) Description() (string, error) {
	if r.Format == FormatTree {
		return tree.Describe(r.Path)
	}
	b, err := r.read()
	if err != nil {
		return "", err
	}
	if r.Format == FormatNotebook {
		d, err := NotebookDescription(b)
		if err != nil {
			return "", fmt.Errorf("routine %s (%s): %w", r.Name, r.Path, err)
		}
		return d, nil
	}
	return ShellDescription(b), nil
}

// Params returns every parameter the routine declares, standard ones
// included, in declaration order.
func (r Routine) Params() ([]Param, error) {
	if r.Format == FormatTree {
		return nil, nil
	}
	b, err := r.read()
	if err != nil {
		return nil, err
	}
	if r.Format == FormatNotebook {
		ps, err := NotebookParams(b)
		if err != nil {
			return nil, fmt.Errorf("routine %s (%s): %w", r.Name, r.Path, err)
		}
		return ps, nil
	}
	return ShellParams(b), nil
}

// CustomParams returns the parameters the routine declares beyond
// StandardParams, in declaration order.
func (r Routine) CustomParams() ([]Param, error) {
	ps, err := r.Params()
	if err != nil {
		return nil, err
	}
	return Custom(ps), nil
}

// Custom filters the standard parameters out of ps.
func Custom(ps []Param) []Param {
	var out []Param
	for _, p := range ps {
		if !IsStandardParam(p.Name) {
			out = append(out, p)
		}
	}
	return out
}

// SelectCustom picks the values for a routine's custom parameters from a
// message's frontmatter fields: only declared names are taken, fields that
// match no declared parameter are ignored, and a declared parameter the
// message does not mention is left out so the routine's own default applies.
func SelectCustom(custom []Param, fields map[string]string) map[string]string {
	out := map[string]string{}
	for _, p := range custom {
		if IsStandardParam(p.Name) {
			continue
		}
		if v, ok := fields[p.Name]; ok {
			out[p.Name] = v
		}
	}
	return out
}

// OrderedParams returns the names of params in the order drivers pass them:
// the standard parameters first (in StandardParams order, those present),
// then the others sorted by name.
func OrderedParams(params map[string]string) []string {
	var out, rest []string
	for _, s := range StandardParams {
		if _, ok := params[s]; ok {
			out = append(out, s)
		}
	}
	for k := range params {
		if !IsStandardParam(k) {
			rest = append(rest, k)
		}
	}
	sort.Strings(rest)
	return append(out, rest...)
}
