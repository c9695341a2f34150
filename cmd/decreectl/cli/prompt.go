package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/decreehq/decree/pkg/config"
	"github.com/decreehq/decree/pkg/layout"
	"github.com/decreehq/decree/pkg/prompt"
	"github.com/decreehq/decree/pkg/routine"
	"github.com/decreehq/decree/pkg/scaffold"
)

// newPromptCmd renders prompt templates. It reads the project's files
// directly (no controller needed); the AI tool it starts is the user's own
// interactive program, run in this terminal.
func newPromptCmd(g *globals) *cobra.Command {
	var printIt, copyIt bool
	cmd := &cobra.Command{
		Use:   "prompt [NAME]",
		Short: "Render a prompt template with the project's context and start the AI tool with it",
		Long: `prompt renders .decree/prompts/NAME.md (or, when the project has none of
that name, NAME.md in the prompts/ directory of routine_source), replacing
{migrations}, {routines}, {processed} and {config} with the project's
current state. Without NAME it lists the prompts.

By default it starts commands.ai_interactive (else the first of claude,
opencode, copilot on PATH) with the rendered prompt as its last argument.
--print writes the prompt to standard output instead; --copy puts it on
the clipboard (wl-copy, xclip, xsel or pbcopy).`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			root, err := g.projectRoot()
			if err != nil {
				return err
			}
			// Prompts render from the project's own files ({config} is
			// config.yml's text), so they work without a controller.
			cfgFile := layout.Path(root, layout.Config)
			cfg, _, err := config.Load(cfgFile)
			if err != nil {
				return err
			}
			lib := routine.ProjectLibrary(root, cfg)
			src := prompt.Source{Dir: layout.Path(root, layout.Prompts), SharedDir: prompt.SharedDir(lib.SharedDir)}
			if len(args) == 0 {
				return g.listPrompts(src)
			}
			tmpl, err := src.Find(args[0])
			if err != nil {
				return &exitError{code: 2, msg: err.Error()}
			}
			pctx, err := prompt.Gather(prompt.Project{Root: root, Config: cfg, ConfigFile: cfgFile,
				ProcessedFile: layout.Path(root, layout.Processed), Routines: lib})
			if err != nil {
				return err
			}
			text, err := tmpl.Render(pctx)
			if err != nil {
				return err
			}
			if !strings.HasSuffix(text, "\n") {
				text += "\n"
			}
			if printIt {
				fmt.Fprint(g.stdout, text)
			}
			if copyIt {
				if err := g.copyPrompt(cmd, tmpl.Name, text); err != nil {
					return err
				}
			}
			if printIt || copyIt {
				return nil
			}
			return g.startInteractive(cmd, root, cfg, text)
		},
	}
	cmd.Flags().BoolVar(&printIt, "print", false, "write the rendered prompt to standard output instead of starting the AI tool")
	cmd.Flags().BoolVar(&copyIt, "copy", false, "copy the rendered prompt to the clipboard instead of starting the AI tool")
	return cmd
}

// listPrompts prints the templates: name, where it comes from, its title.
func (g *globals) listPrompts(src prompt.Source) error {
	list, err := src.List()
	if err != nil {
		return err
	}
	type item struct {
		Name        string `json:"name"`
		Source      string `json:"source"`
		Path        string `json:"path"`
		Description string `json:"description"`
	}
	items := make([]item, 0, len(list))
	for _, t := range list {
		source := "project"
		if t.Shared {
			source = "shared"
		}
		items = append(items, item{t.Name, source, t.Path, t.Description()})
	}
	if g.output == "json" {
		b, err := json.MarshalIndent(items, "", "  ")
		if err != nil {
			return err
		}
		_, err = fmt.Fprintln(g.stdout, string(b))
		return err
	}
	if len(items) == 0 {
		fmt.Fprintf(g.stderr, "decree: no prompts in %s; `decreectl init` writes the default ones\n", src.Dir)
		return nil
	}
	w := g.table("NAME", "SOURCE", "DESCRIPTION")
	for _, it := range items {
		row(w, it.Name, it.Source, it.Description)
	}
	return w.Flush()
}

// copyPrompt puts text on the clipboard.
func (g *globals) copyPrompt(cmd *cobra.Command, name, text string) error {
	argv, err := prompt.Clipboard(nil, nil)
	if err != nil {
		return err
	}
	c := exec.CommandContext(cmd.Context(), argv[0], argv[1:]...)
	c.Stdin = strings.NewReader(text)
	c.Stderr = g.stderr
	if err := c.Run(); err != nil {
		return fmt.Errorf("copy the prompt with %s: %w", filepath.Base(argv[0]), err)
	}
	fmt.Fprintf(g.stderr, "decree: prompt %s copied to the clipboard (%s)\n", name, filepath.Base(argv[0]))
	return nil
}

// startInteractive runs the interactive AI command in the project root
// with the prompt as its last argument, attached to this command's
// standard streams, and passes on its exit status.
func (g *globals) startInteractive(cmd *cobra.Command, root string, cfg *config.Config, text string) error {
	line := cfg.Commands.AIInteractive
	if line == "" {
		tool, ok := scaffold.DetectTool(nil)
		if !ok {
			return &exitError{code: 2, msg: "no interactive AI command: set commands.ai_interactive in .decree/config.yml (e.g. \"claude\"), install claude, opencode or copilot, or use --print / --copy"}
		}
		line = tool.Interactive
	}
	c := exec.CommandContext(cmd.Context(), "bash", "-c", line+` "$1"`, "decree-prompt", text)
	c.Dir = root
	c.Stdin, c.Stdout, c.Stderr = g.stdin, g.stdout, g.stderr
	err := c.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return &exitError{code: ee.ExitCode(), msg: fmt.Sprintf("%s exited %d", line, ee.ExitCode())}
	}
	if err != nil {
		return fmt.Errorf("start %s: %w", line, err)
	}
	return nil
}
