package cli

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/decreehq/decree/pkg/config"
	"github.com/decreehq/decree/pkg/fsutil"
	"github.com/decreehq/decree/pkg/layout"
	"github.com/decreehq/decree/pkg/routine"
	"github.com/decreehq/decree/pkg/tree"
)

// newTreeCmd groups the decision-tree commands. They work on files and
// need no controller: check and show read the project's tree: settings
// when run inside a project, the defaults elsewhere.
func newTreeCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "tree",
		Short: "Check, draw and fetch decision-tree routines (Lucid exports)",
	}
	cmd.AddCommand(newTreeCheckCmd(g), newTreeShowCmd(g), newTreeFetchCmd(g))
	return cmd
}

func newTreeCheckCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "check FILE|ROUTINE",
		Short: "Parse and lint a decision tree; print it as indented text, or every problem",
		Long: "Reads a Lucid CSV or JSON export (a file, or a tree routine of .decree/routines/ by name),\n" +
			"checks it with the project's tree: settings and prints each node with its kind, routes,\n" +
			"CLIs and limits. Exits 1 listing every problem when the tree cannot run.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			t, err := g.loadTree(args[0])
			if err != nil {
				return err
			}
			return t.WriteText(g.stdout)
		},
	}
}

func newTreeShowCmd(g *globals) *cobra.Command {
	var format string
	cmd := &cobra.Command{
		Use:   "show FILE|ROUTINE",
		Short: "Print a decision tree as a Mermaid flowchart (for a README or a pull request) or as text",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if format != "mermaid" && format != "text" {
				return &exitError{code: 2, msg: fmt.Sprintf("--format %s: choose mermaid or text", format)}
			}
			t, err := g.loadTree(args[0])
			if err != nil {
				return err
			}
			if format == "text" {
				return t.WriteText(g.stdout)
			}
			return t.WriteMermaid(g.stdout)
		},
	}
	cmd.Flags().StringVar(&format, "format", "mermaid", "mermaid or text")
	return cmd
}

func newTreeFetchCmd(g *globals) *cobra.Command {
	var out, api string
	cmd := &cobra.Command{
		Use:   "fetch DOC_ID",
		Short: "Download a Lucid document through the Lucid REST API as NAME.tree.json (key in LUCIDCHART_API_KEY)",
		Long: "Fetches GET /documents/DOC_ID/contents with the API key in LUCIDCHART_API_KEY (it needs\n" +
			"the DocumentReadonly grant), writes it to -o (default DOC_ID.tree.json) and checks it.\n" +
			"Save it as .decree/routines/NAME.tree.json to run it as routine NAME.",
		Args: cobra.ExactArgs(1),
		// -o FILE reads naturally here, but -o is the root's output
		// format flag: take a value that is not a format as the file.
		// (This hook replaces the root's, whose only other work is the
		// logger, which tree fetch does not use.)
		PersistentPreRunE: func(*cobra.Command, []string) error {
			g.log = slog.New(slog.DiscardHandler)
			if g.output != "text" && g.output != "json" && out == "" {
				out, g.output = g.output, "text"
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if out == "" {
				out = args[0] + ".tree.json"
			}
			data, err := tree.Fetch(cmd.Context(), nil, api, args[0], os.Getenv("LUCIDCHART_API_KEY"))
			if err != nil {
				return err
			}
			if err := fsutil.WriteFileAtomic(out, data, 0o644); err != nil {
				return err
			}
			fmt.Fprintf(g.stderr, "decree: wrote %s\n", out)
			t, err := g.loadTree(out)
			if err != nil {
				return err
			}
			return t.WriteText(g.stdout)
		},
	}
	cmd.Flags().StringVar(&out, "out", "", "file to write, also given as -o FILE (default DOC_ID.tree.json)")
	cmd.Flags().StringVar(&api, "api-url", envOr("LUCID_API_URL", tree.LucidAPI), "Lucid REST API base URL (env LUCID_API_URL)")
	return cmd
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

// loadTree finds and compiles a tree with the project's settings. Its
// errors list every problem, one per line.
func (g *globals) loadTree(arg string) (*tree.Tree, error) {
	settings := config.Default().Tree
	root, rootErr := g.projectRoot()
	if rootErr == nil {
		cfg, _, err := config.Load(layout.Path(root, layout.Config)) // a local lint, with or without a controller
		if err != nil {
			return nil, err
		}
		settings = cfg.Tree
	} else if g.project != "" {
		return nil, rootErr
	}
	path, err := treeFile(arg, root)
	if err != nil {
		return nil, err
	}
	t, err := tree.Load(path, settings)
	if err != nil {
		var te *tree.Error
		if errors.As(err, &te) {
			var b bytes.Buffer
			fmt.Fprintf(&b, "%s: %d problem(s); the tree cannot run:", path, len(te.Problems))
			for _, p := range te.Problems {
				fmt.Fprintf(&b, "\n  %s", p)
			}
			return nil, &exitError{code: 1, msg: b.String()}
		}
		return nil, err
	}
	return t, nil
}

// treeFile is arg when it is a file, else the tree routine of that name
// in the project.
func treeFile(arg, root string) (string, error) {
	if _, err := os.Stat(arg); err == nil || !errors.Is(err, fs.ErrNotExist) {
		return arg, err
	}
	if root != "" && !strings.ContainsRune(arg, filepath.Separator) {
		dir := layout.Path(root, layout.Routines)
		for _, ext := range append([]string{""}, routine.DriverExtensions("tree")...) {
			p := filepath.Join(dir, arg+ext)
			if _, _, f, ok := routine.SplitExt(filepath.Base(p)); ok && f == routine.FormatTree {
				if _, err := os.Stat(p); err == nil {
					return p, nil
				}
			}
		}
	}
	return "", fmt.Errorf("no file %s, and no tree routine of that name in .decree/routines/", arg)
}
