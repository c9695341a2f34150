// Package skills bundles decree's guidance for AI coding assistants and
// installs it where each assistant looks for skills:
//
//	scope    target   directory
//	project  claude   <project>/.claude/skills/<name>/SKILL.md
//	project  copilot  <project>/.github/skills/<name>/SKILL.md
//	user     claude   ~/.claude/skills/<name>/SKILL.md
//	user     copilot  not supported (Copilot reads skills per repository)
//
// Installing is idempotent: a file identical to the bundled one is reported
// up to date and left alone, a missing one is written, and a file that
// differs (edited by hand, or from another decree version) is a conflict
// that is only overwritten when forced.
package skills

import (
	"bytes"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"github.com/decreehq/decree/pkg/fsutil"
)

//go:embed bundled
var bundled embed.FS

// Skill is one bundled skill.
type Skill struct {
	// Name is the skill's directory name and frontmatter name.
	Name string
	// Description is the frontmatter description (when to use it).
	Description string
	// Content is SKILL.md as installed.
	Content []byte
}

// Scopes and targets.
const (
	ScopeProject  = "project"
	ScopeUser     = "user"
	TargetClaude  = "claude"
	TargetCopilot = "copilot"
)

// Scopes and Targets list the accepted values, default first.
var (
	Scopes  = []string{ScopeProject, ScopeUser}
	Targets = []string{TargetClaude, TargetCopilot}
)

// All returns the bundled skills, sorted by name.
func All() []Skill {
	ents, err := fs.ReadDir(bundled, "bundled")
	if err != nil {
		panic(err) // the embedded tree is fixed at build time
	}
	var out []Skill
	for _, e := range ents {
		b, err := bundled.ReadFile(path.Join("bundled", e.Name(), "SKILL.md"))
		if err != nil {
			panic(err)
		}
		out = append(out, Skill{Name: e.Name(), Description: frontmatterValue(b, "description"), Content: b})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Names returns the bundled skills' names.
func Names() []string {
	var out []string
	for _, s := range All() {
		out = append(out, s.Name)
	}
	return out
}

// Get returns the bundled skill name.
func Get(name string) (Skill, error) {
	for _, s := range All() {
		if s.Name == name {
			return s, nil
		}
	}
	return Skill{}, fmt.Errorf("no bundled skill %q; choose from %s", name, strings.Join(Names(), ", "))
}

// frontmatterValue reads a one-line key: value of the frontmatter.
func frontmatterValue(b []byte, key string) string {
	for _, line := range strings.Split(string(b), "\n")[1:] {
		if line == "---" {
			break
		}
		if v, ok := strings.CutPrefix(line, key+":"); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// Dir returns the skills directory for a scope and target: under root for
// the project scope, under home for the user scope.
func Dir(scope, target, root, home string) (string, error) {
	var base string
	switch scope {
	case ScopeProject:
		base = root
	case ScopeUser:
		base = home
		if target == TargetCopilot {
			return "", errors.New("--scope user is not supported for copilot: GitHub Copilot reads skills from each repository; use --scope project to install into .github/skills/")
		}
	default:
		return "", fmt.Errorf("--scope %q: choose %s", scope, strings.Join(Scopes, " or "))
	}
	switch target {
	case TargetClaude:
		return filepath.Join(base, ".claude", "skills"), nil
	case TargetCopilot:
		return filepath.Join(base, ".github", "skills"), nil
	}
	return "", fmt.Errorf("--target %q: choose %s", target, strings.Join(Targets, " or "))
}

// Outcome is what Install did with one skill.
type Outcome string

// The outcomes of Install.
const (
	Installed   Outcome = "installed"
	UpToDate    Outcome = "up to date"
	Overwritten Outcome = "overwritten"
	Conflict    Outcome = "conflict"
)

// Result is one skill's outcome.
type Result struct {
	Skill   string
	Path    string
	Outcome Outcome
}

// Install writes each named skill's SKILL.md into dir/<name>/. A differing
// existing file is a Conflict (left alone) unless force. It stops at the
// first error that is not a conflict.
func Install(dir string, names []string, force bool) ([]Result, error) {
	var out []Result
	for _, n := range names {
		s, err := Get(n)
		if err != nil {
			return out, err
		}
		p := filepath.Join(dir, s.Name, "SKILL.md")
		r := Result{Skill: s.Name, Path: p, Outcome: Installed}
		old, err := os.ReadFile(p)
		switch {
		case err == nil && bytes.Equal(old, s.Content):
			r.Outcome = UpToDate
		case err == nil && !force:
			r.Outcome = Conflict
		case err == nil:
			r.Outcome = Overwritten
		case !errors.Is(err, fs.ErrNotExist):
			return out, fmt.Errorf("read %s: %w", p, err)
		}
		if r.Outcome == Installed || r.Outcome == Overwritten {
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				return out, fmt.Errorf("install skill %s: %w", s.Name, err)
			}
			if err := fsutil.WriteFileAtomic(p, s.Content, 0o644); err != nil {
				return out, fmt.Errorf("install skill %s: %w", s.Name, err)
			}
		}
		out = append(out, r)
	}
	return out, nil
}

// Summary counts results by outcome: "1 installed, 1 up to date, 1
// conflict" (outcomes with no result are left out).
func Summary(rs []Result) string {
	count := map[Outcome]int{}
	for _, r := range rs {
		count[r.Outcome]++
	}
	var parts []string
	for _, o := range []Outcome{Installed, Overwritten, UpToDate, Conflict} {
		if count[o] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", count[o], o))
		}
	}
	if len(parts) == 0 {
		return "nothing to install"
	}
	return strings.Join(parts, ", ")
}
