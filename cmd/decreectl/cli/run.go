package cli

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/decreehq/decree/pkg/auth"
	"github.com/decreehq/decree/pkg/fsutil"
	"github.com/decreehq/decree/pkg/interact"
	"github.com/decreehq/decree/pkg/message"
	decreev1 "github.com/decreehq/decree/proto/decree/v1"
	"github.com/spf13/cobra"
)

type runFlags struct {
	name   string
	prompt string
	vars   []string
	quiet  bool
}

// maxBodyBytes is the largest message body decreectl sends.
const maxBodyBytes = auth.MaxBodyBytes

func newRunCmd(g *globals) *cobra.Command {
	f := &runFlags{}
	cmd := &cobra.Command{
		Use:   "run [-m NAME] [-p PROMPT] [-v KEY=VALUE ...]",
		Short: "Create one message and process it, with its follow-ups, now",
		Long: `run creates a root message in the inbox and processes it and every
follow-up it spawns (depth-first), streaming the routine output live.

The body comes from -p, else from standard input when it is not a terminal.
-v sets any frontmatter field (routine, input_file, custom parameters); an
input_file ending in .spec.md makes a spec message. Without -m the router
derives a name from the body, else the spec file name, else run-<chain>.
Exit status: 0 when every message of the chain succeeded, 1 when one was
dead-lettered, 2 for bad arguments.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runRun(cmd, g, f) },
	}
	cmd.Flags().StringVarP(&f.name, "name", "m", "", "message name (kebab-cased, at most 50 characters)")
	cmd.Flags().StringVarP(&f.prompt, "prompt", "p", "", "message body")
	cmd.Flags().StringArrayVarP(&f.vars, "var", "v", nil, "frontmatter field KEY=VALUE (repeatable)")
	cmd.Flags().BoolVarP(&f.quiet, "quiet", "q", false, "do not stream routine output")
	return cmd
}

// parseVars turns -v pairs into ordered fields, rejecting bad keys.
func parseVars(vars []string) ([]*decreev1.Field, error) {
	var out []*decreev1.Field
	seen := map[string]bool{}
	for _, kv := range vars {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return nil, fmt.Errorf("-v %q: write KEY=VALUE", kv)
		}
		if err := message.CheckFieldKey(k); err != nil {
			return nil, fmt.Errorf("-v %q: %w", kv, err)
		}
		if seen[k] {
			return nil, fmt.Errorf("-v %q: %s given twice", kv, k)
		}
		seen[k] = true
		out = append(out, &decreev1.Field{Key: k, Value: v})
	}
	return out, nil
}

func runRun(cmd *cobra.Command, g *globals, f *runFlags) error {
	ctx := cmd.Context()
	fields, err := parseVars(f.vars)
	if err != nil {
		return &exitError{code: 2, msg: err.Error()}
	}
	if f.name != "" {
		if err := fsutil.CheckName("message", f.name); err != nil {
			return &exitError{code: 2, msg: fmt.Sprintf("-m %q: %v", f.name, err)}
		}
	}
	body := newReplayable(strings.NewReader(f.prompt))
	stdinTTY := g.stdinIsTerminal()
	if f.prompt == "" && !stdinTTY {
		// The body is sent in pieces as it is read (see submitStream).
		if err := checkBodySize(cmd.InOrStdin()); err != nil {
			return &exitError{code: 2, msg: err.Error()}
		}
		body = newReplayable(cmd.InOrStdin())
	}
	interactive := f.prompt == "" && len(f.vars) == 0 && f.name == "" && stdinTTY
	if g.controller == "" {
		if err := checkInputFile(g, fields); err != nil {
			return &exitError{code: 2, msg: err.Error()}
		}
	}
	g.process = true
	var s *session
	var answers *interact.Answers
	var resp *decreev1.SubmitMessageStreamResponse
	for {
		if s, err = g.connect(ctx); err != nil {
			return err
		}
		defer s.close()
		if interactive && answers == nil {
			if answers, fields, err = g.askInteractive(ctx, s); err != nil {
				return err
			}
			f.name, body = answers.Name, newReplayable(strings.NewReader(answers.Body))
		}
		resp, err = submitStream(ctx, s.client, &decreev1.SubmitMessageRequest{Name: f.name, Fields: fields}, body)
		if err == nil {
			break
		}
		if errors.Is(err, errBodyTooLarge) {
			return &exitError{code: 2, msg: err.Error()}
		}
		if !g.retryConnect(ctx, s, err) {
			return describe(err)
		}
		if !body.rewind() {
			return fmt.Errorf("the controller stopped while the message body was being sent from standard input, which cannot be read again; run the command again: %w", describe(err))
		}
	}
	m := resp.GetMessage()
	fmt.Fprintf(g.stderr, "decree: queued %s as %s\n", m.GetName(), m.GetId())
	res, err := g.followChain(ctx, &s, resp.GetEventSequence(), m.GetChain(), !f.quiet)
	defer s.close() // the session may have changed (followChain took over)
	if err != nil {
		if ctx.Err() != nil {
			return g.interrupted(s, m.GetId())
		}
		return err
	}
	if res.dead > 0 {
		return &exitError{code: 1, msg: fmt.Sprintf("%d message(s) of chain %s were dead-lettered; see `decreectl runs` and .decree/inbox/dead/", res.dead, m.GetChain())}
	}
	if g.printPendingWaits(ctx, s.client) && res.last.GetKind() == decreev1.EventKind_EVENT_KIND_WAITING {
		return &exitError{code: exitWaiting, msg: fmt.Sprintf("chain %s waits for a reply; answer with `decreectl reply`, then run `decreectl process`", m.GetChain())}
	}
	if answers != nil && s.root != "" {
		if err := interact.SaveLastRun(s.root, answers); err != nil {
			fmt.Fprintf(g.stderr, "decree: warning: could not remember this run's answers: %v\n", err)
		}
	}
	return nil
}

// checkInputFile rejects an input_file that is missing or outside the
// project before anything is queued (the controller checks again).
func checkInputFile(g *globals, fields []*decreev1.Field) error {
	for _, fl := range fields {
		if fl.GetKey() != "input_file" {
			continue
		}
		root, err := g.projectRoot()
		if err != nil {
			return err
		}
		rel, err := resolveInputFile(root, fl.GetValue())
		if err != nil {
			return err
		}
		fl.Value = rel
	}
	return nil
}

// resolveInputFile turns an input_file argument into a slash path relative
// to the project root. A relative path is looked up from the working
// directory first (the usual case: decreectl run from inside the project),
// then from the project root (decreectl -C DIR run from elsewhere).
func resolveInputFile(root, arg string) (string, error) {
	var candidates []string
	if filepath.IsAbs(arg) {
		candidates = []string{arg}
	} else {
		if wd, err := os.Getwd(); err == nil {
			candidates = append(candidates, filepath.Join(wd, arg))
		}
		candidates = append(candidates, filepath.Join(root, arg))
	}
	inside := false
	for _, p := range candidates {
		rel, err := filepath.Rel(root, p)
		if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
			continue
		}
		inside = true
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() {
			return filepath.ToSlash(rel), nil
		}
	}
	if !inside {
		return "", fmt.Errorf("-v input_file=%s: the file must be inside the project %s", arg, root)
	}
	return "", fmt.Errorf("-v input_file=%s: no such file in the project %s; check the path (relative paths are taken from the working directory, then from the project root)", arg, root)
}
