package prompt

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/decreehq/decree/pkg/config"
	"github.com/decreehq/decree/pkg/message"
	"github.com/decreehq/decree/pkg/routine"
)

// Context is the text each placeholder is replaced by.
type Context struct {
	Migrations string
	Routines   string
	Processed  string
	Config     string
}

// Project describes the project whose state Gather reads.
type Project struct {
	// Root is the project directory.
	Root string
	// Config is the loaded configuration.
	Config *config.Config
	// ConfigFile is the path of config.yml (rendered as written).
	ConfigFile string
	// ProcessedFile is the path of processed.md.
	ProcessedFile string
	// Routines is the project's routine library.
	Routines routine.Library
}

// Render replaces each {placeholder} of tmpl by its text in c.
func Render(tmpl string, c Context) string {
	return strings.NewReplacer(
		"{migrations}", c.Migrations,
		"{routines}", c.Routines,
		"{processed}", c.Processed,
		"{config}", c.Config,
	).Replace(tmpl)
}

// Gather reads the project's state into a Context. Each part has a short
// note in place of an empty list, so a rendered prompt never has a hole.
func Gather(p Project) (Context, error) {
	processed, order, err := readProcessed(p.ProcessedFile)
	if err != nil {
		return Context{}, err
	}
	var c Context
	if c.Migrations, err = migrations(filepath.Join(p.Root, filepath.FromSlash(p.Config.MigrationsDir)), p.Config.MigrationsDir, processed); err != nil {
		return Context{}, err
	}
	if c.Routines, err = routines(p.Routines, p.Config); err != nil {
		return Context{}, err
	}
	c.Processed = "(no migration processed yet)"
	if len(order) > 0 {
		c.Processed = "- " + strings.Join(order, "\n- ")
	}
	cfg, err := os.ReadFile(p.ConfigFile)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		c.Config = "(no .decree/config.yml: every setting has its default)"
	case err != nil:
		return Context{}, fmt.Errorf("read %s: %w", p.ConfigFile, err)
	default:
		c.Config = strings.TrimRight(string(cfg), "\n")
	}
	return c, nil
}

// readProcessed reads processed.md: the set of names and their order
// (blank lines and lines starting with # are skipped, "- " is optional).
func readProcessed(path string) (map[string]bool, []string, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return map[string]bool{}, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("read %s: %w", path, err)
	}
	set := map[string]bool{}
	var order []string
	for _, l := range strings.Split(string(b), "\n") {
		l = strings.TrimSpace(l)
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		l = strings.TrimSpace(strings.TrimPrefix(l, "- "))
		if !set[l] {
			set[l] = true
			order = append(order, l)
		}
	}
	return set, order, nil
}

// migrations lists the spec files of dir with their titles.
func migrations(dir, shown string, processed map[string]bool) (string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("list migrations in %s: %w", dir, err)
	}
	var names []string
	for _, e := range ents {
		if !e.IsDir() && strings.HasSuffix(e.Name(), ".spec.md") {
			names = append(names, e.Name())
		}
	}
	sort.Strings(names)
	if len(names) == 0 {
		return fmt.Sprintf("(no migrations yet in %s)", shown), nil
	}
	var b strings.Builder
	for i, n := range names {
		if i > 0 {
			b.WriteByte('\n')
		}
		fmt.Fprintf(&b, "- %s: %s", n, specTitle(filepath.Join(dir, n)))
		if processed[n] {
			b.WriteString(" (processed)")
		}
	}
	return b.String(), nil
}

// specTitle is a spec's first markdown heading, else its first line, read
// from the body after any frontmatter.
func specTitle(path string) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return "(unreadable: " + err.Error() + ")"
	}
	body := string(data)
	if m, err := message.Parse(data); err == nil {
		body = string(m.Body)
	}
	for _, l := range strings.Split(body, "\n") {
		if t := strings.TrimSpace(l); strings.HasPrefix(t, "#") {
			return firstLine(t)
		}
	}
	if t := firstLine(body); t != "" {
		return t
	}
	return "(untitled)"
}

// routines lists the enabled routines with their descriptions.
func routines(lib routine.Library, cfg *config.Config) (string, error) {
	ents, err := lib.List()
	if err != nil {
		return "", err
	}
	var lines []string
	for _, e := range ents {
		if !routine.Enabled(e.Routine, cfg.Routines, cfg.SharedRoutines) {
			continue
		}
		desc, err := e.Description()
		if err != nil {
			desc = "(description unreadable: " + err.Error() + ")"
		}
		lines = append(lines, "- "+e.Name+": "+oneLine(desc))
	}
	if len(lines) == 0 {
		return "(no enabled routines)", nil
	}
	return strings.Join(lines, "\n"), nil
}

// oneLine joins a description's title and text: "Title — text ...".
func oneLine(desc string) string {
	var parts []string
	for _, l := range strings.Split(desc, "\n") {
		if l = strings.TrimSpace(strings.TrimLeft(strings.TrimSpace(l), "#")); l != "" {
			parts = append(parts, l)
		}
	}
	if len(parts) == 0 {
		return "(no description)"
	}
	if len(parts) == 1 {
		return parts[0]
	}
	return parts[0] + " — " + strings.Join(parts[1:], " ")
}
