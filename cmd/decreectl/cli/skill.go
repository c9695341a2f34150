package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/decreehq/decree/pkg/interact"
	"github.com/decreehq/decree/pkg/skills"
)

func newSkillCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "skill",
		Short: "Install decree's guidance (skills) for AI coding assistants",
		Args:  cobra.NoArgs,
	}
	cmd.AddCommand(newSkillInstallCmd(g))
	return cmd
}

// skillFlags are the choices of `skill install`.
type skillFlags struct {
	scope, target string
	names         []string
	all, force    bool
}

func newSkillInstallCmd(g *globals) *cobra.Command {
	var f skillFlags
	cmd := &cobra.Command{
		Use:   "install",
		Short: "Install the bundled skills for Claude Code or GitHub Copilot",
		Long: `install writes the bundled skills (` + strings.Join(skills.Names(), ", ") + `) where the assistant
reads them:

  --scope project --target claude    .claude/skills/<name>/SKILL.md in the project
  --scope project --target copilot   .github/skills/<name>/SKILL.md in the project
  --scope user    --target claude    ~/.claude/skills/<name>/SKILL.md

Copilot has no user scope. A file identical to the bundled one is left
alone (up to date); a file that differs is a conflict, left alone and
reported (exit 1) unless --force overwrites it. At a terminal, install asks
for whatever the flags leave open; elsewhere --scope, --target and --skill
or --all are required.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := g.completeSkillFlags(cmd.Context(), &f); err != nil {
				return err
			}
			root, err := g.skillRoot()
			if err != nil {
				return err
			}
			home, err := os.UserHomeDir()
			if err != nil && f.scope == skills.ScopeUser {
				return fmt.Errorf("user scope needs a home directory: %w", err)
			}
			dir, err := skills.Dir(f.scope, f.target, root, home)
			if err != nil {
				return &exitError{code: 2, msg: err.Error()}
			}
			names := f.names
			if f.all {
				names = skills.Names()
			}
			results, err := skills.Install(dir, names, f.force)
			base := root
			if f.scope == skills.ScopeUser {
				base = home
			}
			for _, r := range results {
				shown := r.Path
				if rel, err := filepath.Rel(base, r.Path); err == nil {
					shown = rel
					if f.scope == skills.ScopeUser {
						shown = filepath.Join("~", rel)
					}
				}
				fmt.Fprintf(g.stdout, "%-12s %-16s %s\n", r.Outcome, r.Skill, shown)
			}
			if err != nil {
				return err
			}
			fmt.Fprintf(g.stdout, "%s skill(s): %s\n", f.target, skills.Summary(results))
			for _, r := range results {
				if r.Outcome == skills.Conflict {
					return &exitError{code: 1, msg: "a skill file differs from the bundled one and was left alone; review it, then run again with --force to replace it"}
				}
			}
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.scope, "scope", "", "project (this project) or user (your home directory; claude only)")
	fl.StringVar(&f.target, "target", "", "claude or copilot")
	fl.StringArrayVar(&f.names, "skill", nil, "a skill to install (repeatable): "+strings.Join(skills.Names(), ", "))
	fl.BoolVar(&f.all, "all", false, "install every bundled skill")
	fl.BoolVar(&f.force, "force", false, "overwrite skill files that differ from the bundled ones")
	return cmd
}

// completeSkillFlags checks the flags and, at a terminal, asks for the
// ones left open; elsewhere they are required.
func (g *globals) completeSkillFlags(ctx context.Context, f *skillFlags) error {
	if f.all && len(f.names) > 0 {
		return &exitError{code: 2, msg: "give either --skill or --all, not both"}
	}
	for _, n := range f.names {
		if _, err := skills.Get(n); err != nil {
			return &exitError{code: 2, msg: "--skill: " + err.Error()}
		}
	}
	var missing []string
	if f.target == "" {
		missing = append(missing, "--target claude|copilot")
	}
	if f.scope == "" {
		missing = append(missing, "--scope project|user")
	}
	if !f.all && len(f.names) == 0 {
		missing = append(missing, "--skill NAME (or --all)")
	}
	if len(missing) == 0 {
		return nil
	}
	if !g.stdinIsTerminal() {
		return &exitError{code: 2, msg: "standard input is not a terminal, so nothing can be asked: give " + strings.Join(missing, ", ")}
	}
	choose := func(label, highlight string, choices ...interact.Choice) (string, error) {
		v, err := interact.Choose(ctx, interact.ChooseOptions{Label: label, Choices: choices, Highlight: highlight, In: g.stdin, Out: g.stdout})
		if errors.Is(err, interact.ErrAborted) {
			return "", &exitError{code: 130, msg: "cancelled; nothing was installed"}
		}
		return v, err
	}
	var err error
	if f.target == "" {
		if f.target, err = choose("Assistant", skills.TargetClaude,
			interact.Choice{Name: skills.TargetClaude, Description: "Claude Code (.claude/skills/)"},
			interact.Choice{Name: skills.TargetCopilot, Description: "GitHub Copilot (.github/skills/, project only)"}); err != nil {
			return err
		}
	}
	if f.scope == "" {
		if f.target == skills.TargetCopilot {
			f.scope = skills.ScopeProject // the only scope Copilot has
		} else if f.scope, err = choose("Scope", skills.ScopeProject,
			interact.Choice{Name: skills.ScopeProject, Description: "this project only"},
			interact.Choice{Name: skills.ScopeUser, Description: "every project (your home directory)"}); err != nil {
			return err
		}
	}
	if !f.all && len(f.names) == 0 {
		choices := []interact.Choice{{Name: "all", Description: "every bundled skill"}}
		for _, s := range skills.All() {
			choices = append(choices, interact.Choice{Name: s.Name, Description: s.Description})
		}
		pick, err := choose("Skill", "all", choices...)
		if err != nil {
			return err
		}
		f.all = pick == "all"
		if !f.all {
			f.names = []string{pick}
		}
	}
	return nil
}

// skillRoot is the project scope's directory: the decree project when
// there is one, else -C or the working directory (skills may come first).
func (g *globals) skillRoot() (string, error) {
	if root, err := g.projectRoot(); err == nil {
		return root, nil
	}
	if g.project != "" {
		return filepath.Abs(g.project)
	}
	return os.Getwd()
}
