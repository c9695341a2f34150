// Package scaffold lays down a new project's .decree/ directory: the
// configuration, the router instructions, the ignore file, prompt templates
// for `decreectl prompt` (spec: writing a spec, routine: writing a routine,
// review: reviewing the migrations) and the default develop and
// rust-develop routines wired to the AI command line tool found on PATH.
// The routines implement decree's pre-check (DECREE_PRE_CHECK=true): they
// are ready when the AI tool (and, for rust-develop, cargo) is on PATH. It never overwrites a file that already exists,
// so running it again only fills in what is missing.
package scaffold

import (
	"bytes"
	"embed"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"text/template"

	"github.com/decreehq/decree/pkg/fsutil"
	"github.com/decreehq/decree/pkg/layout"
)

//go:embed templates
var templates embed.FS

// AITool is an AI command-line tool decree knows how to call headless.
type AITool struct {
	// Name is the executable looked up on PATH.
	Name string
	// Invoke is the bash command that runs one prompt, given as "$1".
	Invoke string
	// Resume runs one prompt ("$1") in the earlier session "$session".
	Resume string
	// NewSession, when the tool can be given a session id up front, runs
	// one prompt in the new session "$session"; the routine then prints
	// "Session ID: <id>" itself, so that decree finds it in the log.
	NewSession string
	// Router is the router command: prompt on stdin, answer on stdout.
	Router string
	// Interactive starts the tool for a conversation; the first prompt is
	// added as its last argument (commands.ai_interactive).
	Interactive string
	// UsageFormat, for a tool decree can read costs from, is the format
	// of `decreectl usage record --from`; UsageArgs makes the tool print
	// it.
	UsageFormat string
	UsageArgs   string
	// BudgetFlag is the tool's flag capping what one call may spend in
	// US dollars; the routine passes it DECREE_BUDGET_USD.
	BudgetFlag string
}

// KnownTools are the AI tools init detects, in order of preference.
var KnownTools = []AITool{
	{Name: "claude", Invoke: `claude -p "$1"`, Resume: `claude -p "$1" --resume "$session"`,
		NewSession: `claude -p "$1" --session-id "$session"`, Router: `claude -p "$(cat)"`, Interactive: "claude",
		UsageFormat: "claude-json", UsageArgs: "--output-format json", BudgetFlag: "--max-budget-usd"},
	{Name: "opencode", Invoke: `opencode run "$1"`, Resume: `opencode run --session "$session" "$1"`, Router: `opencode run "$(cat)"`, Interactive: "opencode --prompt"},
	{Name: "copilot", Invoke: `copilot -p "$1" --allow-all-tools`, Resume: `copilot -p "$1" --allow-all-tools --resume "$session"`, Router: `copilot -p "$(cat)"`, Interactive: "copilot -i"},
}

// Options tune Init.
type Options struct {
	// Tool forces an AI tool by name; empty means detect on PATH.
	Tool string
	// LookPath finds executables; nil means exec.LookPath.
	LookPath func(string) (string, error)
}

// Report says what Init did.
type Report struct {
	// Tool is the AI tool the routines call ("" when none was found).
	Tool string
	// Created lists files written, relative to the project root.
	Created []string
	// Kept lists files that already existed and were left alone.
	Kept []string
	// Updated lists files that existed and were completed: a
	// .decree/.gitignore missing some of the runtime files gets them
	// appended, its own lines kept.
	Updated []string
}

// Dirs are the directories of .decree/ that Init creates.
var Dirs = layout.InitDirs

// Init creates root/.decree/ with everything a project needs.
func Init(root string, opts Options) (*Report, error) {
	tool, err := pickTool(opts)
	if err != nil {
		return nil, err
	}
	dot := filepath.Join(root, layout.Dir)
	for _, d := range Dirs {
		if err := os.MkdirAll(filepath.Join(dot, d), 0o755); err != nil {
			return nil, fmt.Errorf("init: create %s: %w", filepath.Join(dot, d), err)
		}
	}
	data := templateData(tool)
	rep := &Report{Tool: tool.Name}
	err = fs.WalkDir(templates, "templates", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel := strings.TrimPrefix(p, "templates/")
		if rel == "gitignore" {
			rel = ".gitignore"
		}
		raw, err := templates.ReadFile(p)
		if err != nil {
			return err
		}
		var out bytes.Buffer
		if err := template.Must(template.New(rel).Parse(string(raw))).Execute(&out, data); err != nil {
			return fmt.Errorf("render %s: %w", rel, err)
		}
		dst := filepath.Join(dot, filepath.FromSlash(rel))
		show := filepath.ToSlash(filepath.Join(layout.Dir, rel))
		if _, err := os.Lstat(dst); err == nil {
			if rel == layout.GitIgnore {
				added, err := completeGitIgnore(dst, out.Bytes())
				if err != nil {
					return err
				}
				if added {
					rep.Updated = append(rep.Updated, show)
					return nil
				}
			}
			rep.Kept = append(rep.Kept, show)
			return nil
		}
		mode := fs.FileMode(0o644)
		if strings.HasSuffix(rel, ".sh") {
			mode = 0o755
		}
		if err := fsutil.WriteFileAtomic(dst, out.Bytes(), mode); err != nil {
			return err
		}
		rep.Created = append(rep.Created, show)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("init: %w", err)
	}
	return rep, nil
}

// DetectTool returns the first of KnownTools on PATH (look nil means
// exec.LookPath); ok is false when none is.
func DetectTool(look func(string) (string, error)) (AITool, bool) {
	t, _ := pickTool(Options{LookPath: look})
	return t, t.Name != ""
}

func pickTool(opts Options) (AITool, error) {
	look := opts.LookPath
	if look == nil {
		look = exec.LookPath
	}
	if opts.Tool != "" {
		for _, t := range KnownTools {
			if t.Name == opts.Tool {
				return t, nil
			}
		}
		names := make([]string, len(KnownTools))
		for i, t := range KnownTools {
			names[i] = t.Name
		}
		return AITool{}, fmt.Errorf("init: unknown AI tool %q; choose one of %s", opts.Tool, strings.Join(names, ", "))
	}
	for _, t := range KnownTools {
		if _, err := look(t.Name); err == nil {
			return t, nil
		}
	}
	return AITool{}, nil
}

type tmplData struct {
	Router      string
	Interactive string
	AIFunction  string
	// PreCheck is the bash of a routine's pre-check that fails when the
	// AI tool cannot be called.
	PreCheck string
}

func templateData(t AITool) tmplData {
	if t.Name == "" {
		return tmplData{
			Router:      `""`,
			Interactive: `""`,
			AIFunction: `# No AI tool (claude, opencode, copilot) was on PATH when this file was
# written. Replace the body of ai() with the command that runs one prompt.
ai() {
  echo "no AI tool configured: edit ${BASH_SOURCE[0]} and make ai() call your tool" >&2
  return 1
}`,
			PreCheck: `  # Replace this line by a check for your tool when you edit ai().
  echo "no AI tool configured: make ai() in ${BASH_SOURCE[0]} call your tool"; exit 1`,
		}
	}
	return tmplData{
		Router:      yamlQuote(t.Router),
		Interactive: yamlQuote(t.Interactive),
		AIFunction:  aiFunction(t),
		PreCheck: fmt.Sprintf(`  command -v %s >/dev/null 2>&1 || { echo "%s is not on PATH; install it or make ai() in ${BASH_SOURCE[0]} call another tool"; exit 1; }`,
			t.Name, t.Name),
	}
}

// aiFunction writes the routine's ai() for a tool. After an attempt that
// hit the tool's usage limit, decree retries with DECREE_PREVIOUS_SESSION_ID
// set to the session id the attempt printed; the retry's first call then
// resumes that session. A routine with an attempts list in config.yml
// (escalation) gets the attempt's entry as DECREE_ATTEMPT_VALUE, passed as
// the tool's --model; what is left of the message's budget
// (DECREE_BUDGET_USD) goes to a tool with a budget flag (claude
// --max-budget-usd; decree itself stops the attempt when the message goes
// over). For a tool whose JSON output decree reads, every call
// prints it and pipes it through `decreectl usage record --tee`, which
// appends the call's cost to $DECREE_USAGE_FILE and passes the output on
// to the log.
func aiFunction(t AITool) string {
	call := func(cmd string) string {
		cmd += ` ${DECREE_ATTEMPT_VALUE:+--model "$DECREE_ATTEMPT_VALUE"}`
		if t.BudgetFlag != "" {
			cmd += ` ${DECREE_BUDGET_USD:+` + t.BudgetFlag + ` "$DECREE_BUDGET_USD"}`
		}
		if t.UsageFormat != "" {
			cmd += " " + t.UsageArgs + " | record_usage " + t.UsageFormat
		}
		return cmd
	}
	fresh := "    " + call(t.Invoke)
	if t.NewSession != "" {
		fresh = `    session="$(cat /proc/sys/kernel/random/uuid 2>/dev/null || uuidgen)"
    echo "Session ID: $session"
    ` + call(t.NewSession)
	}
	record := ""
	if t.UsageFormat != "" {
		record = `# Appends what one call cost to $DECREE_USAGE_FILE and passes the tool's
# output on (outside decree, or without decreectl on PATH, it only passes
# it on).
record_usage() {
  if [ -n "${DECREE_USAGE_FILE:-}" ] && command -v decreectl >/dev/null 2>&1; then
    decreectl usage record --from "$1" --tee
  else
    cat
  fi
}

`
	}
	return fmt.Sprintf(`%s# Runs one prompt with %s, headless. After a usage limit, decree retries
# with DECREE_PREVIOUS_SESSION_ID (the session the limited attempt used):
# the first call then resumes that session. DECREE_ATTEMPT_VALUE (the
# routine's attempts list in config.yml) picks the model.
ai() {
  local session
  if [ -n "${DECREE_PREVIOUS_SESSION_ID:-}" ]; then
    session="$DECREE_PREVIOUS_SESSION_ID"
    unset DECREE_PREVIOUS_SESSION_ID
    echo "Session ID: $session (resumed)"
    %s
  else
%s
  fi
}`, record, t.Name, call(t.Resume), fresh)
}

// yamlQuote renders s as a double-quoted YAML scalar.
func yamlQuote(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`)
	return `"` + r.Replace(s) + `"`
}

// completeGitIgnore appends to an existing .decree/.gitignore the patterns
// of want it lacks (a project set up by an older decree ignores fewer of
// the runtime files), keeping every line of its own. It reports whether it
// added any.
func completeGitIgnore(path string, want []byte) (bool, error) {
	have, err := os.ReadFile(path)
	if err != nil {
		return false, fmt.Errorf("read %s: %w", path, err)
	}
	present := map[string]bool{}
	for _, l := range strings.Split(string(have), "\n") {
		present[strings.TrimSpace(l)] = true
	}
	var missing []string
	for _, l := range strings.Split(string(want), "\n") {
		l = strings.TrimSpace(l)
		if l != "" && !strings.HasPrefix(l, "#") && !present[l] {
			missing = append(missing, l)
		}
	}
	if len(missing) == 0 {
		return false, nil
	}
	out := append([]byte{}, have...)
	if len(out) > 0 && out[len(out)-1] != '\n' {
		out = append(out, '\n')
	}
	out = append(out, "# Added by decreectl init: more runtime state of decree.\n"+strings.Join(missing, "\n")+"\n"...)
	fi, err := os.Stat(path)
	if err != nil {
		return false, fmt.Errorf("stat %s: %w", path, err)
	}
	if err := fsutil.WriteFileAtomic(path, out, fi.Mode().Perm()); err != nil {
		return false, fmt.Errorf("update %s: %w", path, err)
	}
	return true, nil
}
