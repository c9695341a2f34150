// Package engine runs a compiled decision tree (pkg/tree) once: from the
// root it runs each step's prompt through the step's CLI, validates the
// answer, retries with the critiques, follows the chosen route, and ends
// at a step with no outgoing line. It streams what happens to Output and
// leaves tree.json (the chart, every step run with its response,
// validation and retries) and tree.log (every CLI call with its prompt and
// output) in the run directory (tree.try-00N.json and .log for attempt N).
//
// # Steps
//
//   - Start and End terminators are not sent to a CLI.
//   - A process step's prompt is followed by an instruction to answer with
//     JSON {completed, secs_taken, tokens_used, comments}; a decision's by
//     the route labels and an instruction to answer with JSON {choices,
//     answer, reasons}. Answers are found in the CLI's stdout even inside a
//     ``` fence or after other text (the last object with the key wins).
//   - A step with a validation prompt (process steps unless tagged
//     NoValidation; decisions that set validate_prompt) is judged by the
//     validate CLI, which answers {fully_completed, partially_completed,
//     should_retry, warnings}. A process answer with completed false counts
//     as a failed validation too. Each failure is retried through the retry
//     CLI with every earlier critique appended, up to the step's retries;
//     then the run fails.
//   - A decision's answer picks the route with that label (exact, then
//     trimmed and case-insensitive); an answer matching none fails the run,
//     naming the answer and the labels.
//   - Each CLI call runs as `bash -c TEMPLATE` in its own process group,
//     with the prompt in $DECREE_TREE_PROMPT (see ShellCommand) and
//     DECREE_TREE_NODE, DECREE_TREE_STEP (run, validate or retry) and
//     DECREE_TREE_CLI set. When the step's timeout passes the group gets
//     SIGTERM, then SIGKILL after the grace period, and the run fails. A
//     CLI that exits non-zero or prints no answer fails the run.
//
// Prompts may use {{message}} (the message body, without frontmatter),
// {{message_file}}, {{spec_file}} and the other standard parameters
// (tree.Placeholders).
package engine

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/decreehq/decree/pkg/message"
	"github.com/decreehq/decree/pkg/tree"
)

// Artifacts in the run directory, for attempt 1; attempt N writes
// tree.try-00N.json and tree.try-00N.log, as decree names the routine logs
// of later attempts (see ArtifactName).
const (
	ReportFile = "tree.json"
	LogFile    = "tree.log"
)

// ArtifactName is the name of an artifact (ReportFile or LogFile) for an
// attempt: tree.json for attempt 1 (or 0, outside decree), tree.try-002.json
// for attempt 2, and so on.
func ArtifactName(name string, attempt int) string {
	if attempt <= 1 {
		return name
	}
	ext := filepath.Ext(name)
	return fmt.Sprintf("%s.try-%03d%s", strings.TrimSuffix(name, ext), attempt, ext)
}

// Options configure one run.
type Options struct {
	Tree *tree.Tree
	// Routine names the routine in messages and the report.
	Routine string
	// Workdir is where the CLIs run (the project root).
	Workdir string
	// Params are decree's standard parameters (message_file, spec_file,
	// ...); relative paths are relative to Workdir.
	Params map[string]string
	// Env is the CLIs' environment; nil means os.Environ().
	Env []string
	// RunDir receives tree.json and tree.log; "" writes neither.
	RunDir string
	// Attempt is decree's attempt number, recorded in the report.
	Attempt int
	// Output receives the live account of the run and every CLI's output.
	Output io.Writer
	// Grace is the SIGTERM -> SIGKILL delay for a CLI that times out.
	Grace time.Duration
}

// Run walks the tree once. Its error says which step failed and why.
func Run(ctx context.Context, o Options) (err error) {
	if o.Output == nil {
		o.Output = io.Discard
	}
	if o.Env == nil {
		o.Env = os.Environ()
	}
	if o.Grace <= 0 {
		o.Grace = 5 * time.Second
	}
	r := &runner{o: o}
	if err := r.open(); err != nil {
		return err
	}
	defer func() { r.close(err) }()
	s := o.Tree.Root
	if next, ok, err := r.resume(); err != nil {
		return err
	} else if ok {
		s = next // after a reply to the tree's question (ask.go)
	}
	for s != nil {
		next, err := r.step(ctx, s)
		if err != nil {
			return fmt.Errorf("%s: %w", s.Label(), err)
		}
		s = next
	}
	return nil
}

type runner struct {
	o       Options
	log     *os.File
	report  Report
	message *string
}

// step runs one step and returns the next (nil at the end).
func (r *runner) step(ctx context.Context, s *tree.Step) (*tree.Step, error) {
	switch s.Kind {
	case tree.KindStart:
		r.say("%s: start", s.Label())
		r.add(NodeReport{ID: s.ID, Where: s.Where, Name: s.Text, Type: string(s.Kind), Route: s.Routes[0].Label})
		return s.Routes[0].To, nil
	case tree.KindAsk:
		return nil, r.ask(s)
	case tree.KindEnd:
		r.say("%s: end", s.Label())
		r.add(NodeReport{ID: s.ID, Where: s.Where, Name: s.Text, Type: string(s.Kind)})
		return nil, nil
	}
	prompt, err := r.fill(s.Prompt)
	if err != nil {
		return nil, err
	}
	nr := NodeReport{ID: s.ID, Where: s.Where, Name: s.Text, Type: string(s.Kind), CLI: s.CLI}
	defer func() { r.add(nr) }()
	answer, err := r.runValidated(ctx, s, prompt, &nr)
	if err != nil {
		nr.Error = err.Error()
		return nil, err
	}
	if s.Kind == tree.KindDecision {
		route, ok := s.Match(answer)
		if !ok {
			err := fmt.Errorf("the answer %q matches no route; the routes are %s", answer, strings.Join(quote(s.Labels()), ", "))
			nr.Error = err.Error()
			return nil, err
		}
		nr.Route = route.Label
		r.say("%s: answered %q -> %s", s.Label(), answer, route.To.Label())
		return route.To, nil
	}
	if len(s.Routes) == 0 {
		return nil, nil
	}
	return s.Routes[0].To, nil
}

// runValidated runs a step, validates it and retries until it passes or
// the retries are spent. It returns the decision's answer.
func (r *runner) runValidated(ctx context.Context, s *tree.Step, prompt string, nr *NodeReport) (string, error) {
	instr := instruction(s)
	var critiques []string
	for try := 0; ; try++ {
		role, code, full := "run", s.CLI, runPrompt(prompt, instr)
		if try > 0 {
			role, code, full = "retry", s.RetryCLI, retryPrompt(prompt, critiques, instr)
		}
		nr.Retries = try
		out, err := r.call(ctx, s, role, code, full)
		if err != nil {
			return "", err
		}
		var answer, feedback string
		if s.Kind == tree.KindDecision {
			d, err := ParseDecision(out)
			if err != nil {
				return "", fmt.Errorf("CLI %s: %w; the decision must answer with JSON naming one route", code, err)
			}
			nr.Response, answer = d, d.Answer
		} else {
			p, err := ParseProcess(out)
			if err != nil {
				return "", fmt.Errorf("CLI %s: %w; the step must end its answer with the JSON asked for", code, err)
			}
			nr.Response = p
			if !p.Completed {
				feedback = incomplete(p)
			}
		}
		if feedback == "" && s.ValidatePrompt != "" {
			vout, err := r.call(ctx, s, "validate", s.ValidateCLI, validatePrompt(s, prompt, out))
			if err != nil {
				return "", fmt.Errorf("validation: %w", err)
			}
			v, err := ParseValidation(vout)
			if err != nil {
				return "", fmt.Errorf("validation by CLI %s: %w", s.ValidateCLI, err)
			}
			nr.Validation = &v
			if !v.FullyCompleted {
				feedback = critique(v)
			}
		}
		if feedback == "" {
			return answer, nil
		}
		r.say("%s: not accepted: %s", s.Label(), oneLine(feedback))
		critiques = append(critiques, feedback)
		if try >= s.Retries {
			return "", fmt.Errorf("not accepted after %d retries (limit %d): %s", try, s.Retries, oneLine(feedback))
		}
	}
}

// call runs one CLI call, logging it and streaming its output.
func (r *runner) call(ctx context.Context, s *tree.Step, role, code, prompt string) (string, error) {
	tmpl, ok := r.o.Tree.Settings.CLIs[code]
	if !ok {
		return "", fmt.Errorf("CLI codename %s has no command template; add it under tree.clis in .decree/config.yml", code)
	}
	r.say("%s: %s via %s (timeout %s)", s.Label(), role, code, s.Timeout)
	r.logf("\n=== %s | %s via %s | %s\n--- command\n%s\n--- prompt\n%s\n--- output\n", time.Now().UTC().Format(time.RFC3339), role, code, s.Label(), tmpl, prompt)
	var out io.Writer = r.o.Output
	if r.log != nil {
		out = io.MultiWriter(r.o.Output, r.log)
	}
	env := append(append([]string(nil), r.o.Env...), "DECREE_TREE_NODE="+s.ID, "DECREE_TREE_STEP="+role, "DECREE_TREE_CLI="+code)
	res, err := call{Template: tmpl, Code: code, Prompt: prompt, Dir: r.o.Workdir, Env: env, Timeout: s.Timeout, Grace: r.o.Grace, Output: out}.run(ctx)
	r.logf("\n--- end: exit code %d after %s%s\n", res.ExitCode, res.Duration.Round(time.Millisecond), map[bool]string{true: " (timed out)"}[res.TimedOut])
	switch {
	case err != nil:
		return "", err
	case res.TimedOut:
		return "", fmt.Errorf("CLI %s (%s) timed out after %s; its process group was killed. Raise the node's timeout metadata or tree.timeout_s", code, role, s.Timeout)
	case res.ExitCode != 0:
		return "", fmt.Errorf("CLI %s (%s, `%s`) exited with code %d", code, role, tmpl, res.ExitCode)
	}
	return r.unwrap(res.Stdout), nil
}

// fill replaces {{name}} placeholders.
func (r *runner) fill(prompt string) (string, error) {
	var ferr error
	out := tree.PlaceholderRe.ReplaceAllStringFunc(prompt, func(m string) string {
		name := tree.PlaceholderRe.FindStringSubmatch(m)[1]
		if name == "message" {
			body, err := r.messageBody()
			if err != nil && ferr == nil {
				ferr = err
			}
			return body
		}
		v, ok := r.o.Params[name]
		if !ok && ferr == nil {
			ferr = fmt.Errorf("the prompt uses %s but the run has no %s parameter", m, name)
		}
		return v
	})
	return out, ferr
}

// messageBody reads the message file once, without its frontmatter.
func (r *runner) messageBody() (string, error) {
	if r.message != nil {
		return *r.message, nil
	}
	p := r.o.Params["message_file"]
	if p == "" {
		return "", fmt.Errorf("the prompt uses {{message}} but the run has no message_file parameter")
	}
	if !filepath.IsAbs(p) {
		p = filepath.Join(r.o.Workdir, p)
	}
	data, err := os.ReadFile(p)
	if err != nil {
		return "", fmt.Errorf("read the message for {{message}}: %w", err)
	}
	body := string(data)
	if m, err := message.Parse(data); err == nil {
		body = string(m.Body)
	}
	body = strings.TrimSpace(body)
	r.message = &body
	return body, nil
}

// say prints one line of the live account (and logs it).
func (r *runner) say(format string, args ...any) {
	line := "tree: " + fmt.Sprintf(format, args...) + "\n"
	_, _ = io.WriteString(r.o.Output, line)
	r.logf("%s", line)
}

func (r *runner) logf(format string, args ...any) {
	if r.log != nil {
		fmt.Fprintf(r.log, format, args...)
	}
}

func quote(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = fmt.Sprintf("%q", s)
	}
	return out
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }
