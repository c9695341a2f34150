// Package prompt renders decree's interactive prompt templates: markdown
// files named NAME.md in the project's .decree/prompts/, with a shared
// directory behind them (the prompts/ directory inside routine_source) that
// only supplies names the project does not have.
//
// A template may contain four placeholders, replaced by the project's
// state when it is rendered (any other text in braces is left alone):
//
//   - {migrations}: every spec file of the migrations directory, in
//     processing order, with its title (its first markdown heading, else
//     its first line) and "(processed)" after those processed.md lists;
//   - {routines}: every enabled routine with its description;
//   - {processed}: the migrations processed.md lists, in its order;
//   - {config}: .decree/config.yml as written.
//
// Gather reads that state; Render substitutes it.
package prompt

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/decreehq/decree/pkg/fsutil"
)

// Placeholders are the names Render replaces, in braces.
var Placeholders = []string{"migrations", "routines", "processed", "config"}

// Source is where templates are found.
type Source struct {
	// Dir is the project's prompt directory (.decree/prompts).
	Dir string
	// SharedDir is the shared prompt directory; empty means none.
	SharedDir string
}

// Template is one prompt template file.
type Template struct {
	// Name is the file name without ".md".
	Name string
	// Path is the file's path.
	Path string
	// Shared is true when it comes from SharedDir.
	Shared bool
}

// ErrNotFound is matched (errors.Is) when no template has the name.
var ErrNotFound = errors.New("prompt not found")

// SharedDir returns the shared prompt directory for a routine_source
// directory ("" for none).
func SharedDir(routineSource string) string {
	if routineSource == "" {
		return ""
	}
	return filepath.Join(routineSource, "prompts")
}

// List returns every template, sorted by name; a name in both directories
// is listed once, from the project.
func (s Source) List() ([]Template, error) {
	seen := map[string]bool{}
	var out []Template
	for _, d := range s.dirs() {
		ents, err := os.ReadDir(d.dir)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("list prompts in %s: %w", d.dir, err)
		}
		for _, e := range ents {
			name, ok := strings.CutSuffix(e.Name(), ".md")
			if !ok || name == "" || strings.HasPrefix(name, ".") || e.IsDir() || seen[name] {
				continue
			}
			seen[name] = true
			out = append(out, Template{Name: name, Path: filepath.Join(d.dir, e.Name()), Shared: d.shared})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// Find returns the template name (with or without ".md"), from the project
// first, then the shared directory.
func (s Source) Find(name string) (Template, error) {
	name = strings.TrimSuffix(name, ".md")
	if err := fsutil.CheckName("prompt", name); err != nil {
		return Template{}, err
	}
	var looked []string
	for _, d := range s.dirs() {
		p := filepath.Join(d.dir, name+".md")
		looked = append(looked, p)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() {
			return Template{Name: name, Path: p, Shared: d.shared}, nil
		}
	}
	return Template{}, fmt.Errorf("%w: %q (looked for %s); run `decreectl prompt` to list the prompts", ErrNotFound, name, strings.Join(looked, ", "))
}

type dir struct {
	dir    string
	shared bool
}

func (s Source) dirs() []dir {
	out := []dir{{s.Dir, false}}
	if s.SharedDir != "" {
		out = append(out, dir{s.SharedDir, true})
	}
	return out
}

// Description is the template's first non-empty line without markdown
// heading marks, for listings.
func (t Template) Description() string {
	b, err := os.ReadFile(t.Path)
	if err != nil {
		return ""
	}
	return firstLine(string(b))
}

// Render reads the template and substitutes c.
func (t Template) Render(c Context) (string, error) {
	b, err := os.ReadFile(t.Path)
	if err != nil {
		return "", fmt.Errorf("read prompt %s: %w", t.Name, err)
	}
	return Render(string(b), c), nil
}

// firstLine is the first non-empty line of text without leading #s.
func firstLine(text string) string {
	for _, l := range strings.Split(text, "\n") {
		if l = strings.TrimSpace(strings.TrimLeft(strings.TrimSpace(l), "#")); l != "" {
			return l
		}
	}
	return ""
}
