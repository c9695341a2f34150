package cli

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/decreehq/decree/pkg/usage"
	"github.com/spf13/cobra"
)

func newUsageCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "usage",
		Short: "Record what AI calls cost (for routines)",
	}
	cmd.AddCommand(newUsageRecordCmd(g))
	return cmd
}

// newUsageRecordCmd is the helper routines pipe an AI tool's JSON output
// through. It never fails the routine over what the tool printed: output
// without usage (a tool stopped by a usage limit) records nothing and
// warns; only bad arguments exit non-zero.
func newUsageRecordCmd(g *globals) *cobra.Command {
	var from, model, file string
	var tee bool
	cmd := &cobra.Command{
		Use:   "record --from claude-json|codex-json|gemini-json [FILE|-]",
		Short: "Append usage lines parsed from an AI tool's JSON output to $DECREE_USAGE_FILE",
		Long: `record reads what an AI tool printed in its JSON mode (FILE, or standard input
for - or no argument) and appends one line per AI call to the attempt's usage
file ($DECREE_USAGE_FILE, or --file):

  claude-json   claude -p … --output-format json (or stream-json)
  codex-json    codex exec --json …
  gemini-json   gemini -p … --output-format json

With --tee the input is copied to standard output as it is read, so a routine
keeps the tool's output in its log:

  claude -p "$task" --output-format json | decreectl usage record --from claude-json --tee

Output without usage records nothing and warns; outside decree (no
DECREE_USAGE_FILE) nothing is recorded. It exits 0 in both cases, so a
routine never fails over cost accounting.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !validFormat(from) {
				return &exitError{code: 2, msg: fmt.Sprintf("usage record: --from %q: choose one of %s", from, strings.Join(usage.Formats, ", "))}
			}
			var in io.Reader = g.stdin
			name := "standard input"
			if len(args) == 1 && args[0] != "-" {
				f, err := os.Open(args[0])
				if err != nil {
					fmt.Fprintf(g.stderr, "decreectl usage: nothing recorded: %v\n", err)
					return nil
				}
				defer f.Close()
				in, name = f, args[0]
			}
			if tee {
				in = io.TeeReader(in, g.stdout)
			}
			out, err := usage.ReadAll(in)
			if err != nil {
				fmt.Fprintf(g.stderr, "decreectl usage: %v\n", err)
			}
			if tee {
				// The rest beyond the read limit still reaches the log.
				_, _ = io.Copy(io.Discard, in)
			}
			recs, warns, _ := usage.Parse(from, bytes.TrimSpace(out), model)
			for _, w := range warns {
				fmt.Fprintf(g.stderr, "decreectl usage: %s: %s\n", name, w)
			}
			if file == "" {
				file = os.Getenv(usage.FileEnv)
			}
			if file == "" {
				if len(recs) > 0 {
					fmt.Fprintf(g.stderr, "decreectl usage: %s is not set (not run by decree); %d line(s) not recorded\n", usage.FileEnv, len(recs))
				}
				return nil
			}
			if err := usage.Append(file, recs); err != nil {
				fmt.Fprintf(g.stderr, "decreectl usage: %v\n", err)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&from, "from", "", "the tool's output format: "+strings.Join(usage.Formats, ", "))
	cmd.Flags().StringVar(&model, "model", "", "the model, for lines whose output names none (Codex)")
	cmd.Flags().StringVar(&file, "file", "", "usage file to append to (default $"+usage.FileEnv+")")
	cmd.Flags().BoolVar(&tee, "tee", false, "copy the input to standard output")
	return cmd
}

func validFormat(f string) bool {
	for _, x := range usage.Formats {
		if f == x {
			return true
		}
	}
	return false
}
