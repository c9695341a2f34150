package cli

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	decreev1 "github.com/decreehq/decree/proto/decree/v1"
	"github.com/spf13/cobra"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// exitWaiting is the exit status of run and process when they end with
// messages waiting for a reply.
const exitWaiting = 3

func newWaitsCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "waits",
		Short: "List the messages waiting for a person's reply (questions and reviews)",
		Long: `waits lists every message waiting for a reply: a routine's question
(it wrote DECREE_ASK_FILE and exited 0) or a successful attempt awaiting
review (review: true). Each line shows the wait id, the question, the
options, how long it has waited, its deadline and the command that answers it.`,
		Args: cobra.NoArgs,
		RunE: withSession(g, func(cmd *cobra.Command, s *session, _ []string) error {
			resp, err := s.client.ListWaits(cmd.Context(), &decreev1.ListWaitsRequest{})
			if err != nil {
				return describe(err)
			}
			if g.output == "json" {
				return g.printJSON(resp)
			}
			if len(resp.GetWaits()) == 0 {
				fmt.Fprintln(g.stderr, "decree: nothing waits for a reply")
				return nil
			}
			printWaits(g.stdout, resp.GetWaits(), clock())
			return nil
		}),
	}
}

// printWaits writes the waits for people.
func printWaits(w io.Writer, waits []*decreev1.Wait, now time.Time) {
	for _, wt := range waits {
		age := "?"
		if a := wt.GetAsked(); a != nil {
			age = now.Sub(a.AsTime()).Round(time.Second).String()
		}
		deadline := "none"
		if d := wt.GetDeadline(); d != nil {
			deadline = fmt.Sprintf("%s (in %s)", d.AsTime().In(now.Location()).Format(time.RFC3339), d.AsTime().Sub(now).Round(time.Second))
		}
		fmt.Fprintf(w, "%s  %s of %s (attempt %d), waiting %s, deadline %s\n", wt.GetId(), wt.GetKind(), wt.GetMessageId(), wt.GetAttempt(), age, deadline)
		fmt.Fprintf(w, "  %s\n", strings.ReplaceAll(strings.TrimSpace(wt.GetQuestion()), "\n", "\n  "))
		for _, o := range wt.GetOptions() {
			if o.GetMeaning() != "" {
				fmt.Fprintf(w, "    %s: %s\n", o.GetName(), o.GetMeaning())
			} else {
				fmt.Fprintf(w, "    %s\n", o.GetName())
			}
		}
		fmt.Fprintf(w, "  reply: %s\n", wt.GetReplyCommand())
	}
}

// printPendingWaits lists the waits at the end of run and process; it
// reports whether there were any.
func (g *globals) printPendingWaits(ctx context.Context, c decreev1.ControllerServiceClient) bool {
	resp, err := c.ListWaits(ctx, &decreev1.ListWaitsRequest{})
	if err != nil || len(resp.GetWaits()) == 0 {
		return false
	}
	fmt.Fprintf(g.stderr, "decree: %d message(s) wait for a reply:\n", len(resp.GetWaits()))
	printWaits(g.stderr, resp.GetWaits(), clock())
	return true
}

func newReplyCmd(g *globals) *cobra.Command {
	var note, file, requestID string
	cmd := &cobra.Command{
		Use:   "reply WAIT-OR-MESSAGE-ID OPTION [-m NOTE | -f FILE]",
		Short: "Answer a message waiting for a reply (a routine's question or a review)",
		Long: `reply records an answer to a wait (its id from ` + "`decreectl waits`" + `, or the
waiting message's id). The answer is durable before the command returns; the
next attempt sees it as DECREE_REPLY (the option) and DECREE_REPLY_FILE (the
note). A review takes approve, reject (revert, dead-letter with the note) or
retry (the note goes into the next attempt's failure context).

A reply to a message that is not waiting exits 4 (FAILED_PRECONDITION), an
unknown option 2 (INVALID_ARGUMENT), a second answer to the same wait 5
(ALREADY_EXISTS); a refused reply is recorded and changes nothing. Without a
daemon, run ` + "`decreectl process`" + ` afterwards to go on.`,
		Args: cobra.ExactArgs(2),
		RunE: withSession(g, func(cmd *cobra.Command, s *session, args []string) error {
			if note != "" && file != "" {
				return &exitError{code: 2, msg: "give the note with -m or -f, not both"}
			}
			body := []byte(note)
			if file != "" {
				var err error
				if file == "-" {
					body, err = io.ReadAll(io.LimitReader(cmd.InOrStdin(), 1<<20+1))
				} else {
					body, err = os.ReadFile(file)
				}
				if err != nil {
					return &exitError{code: 2, msg: fmt.Sprintf("-f %s: %v", file, err)}
				}
			}
			if requestID == "" {
				requestID = newRequestID()
			}
			req := &decreev1.ReplyRequest{To: args[0], Option: args[1], Note: body, RequestId: requestID}
			resp, err := s.client.Reply(cmd.Context(), req)
			if err != nil {
				return replyError(err)
			}
			if g.output == "json" {
				return g.printJSON(resp)
			}
			fmt.Fprintf(g.stderr, "decree: recorded %q for %s (%s)\n", resp.GetOption(), resp.GetWait().GetId(), resp.GetWait().GetMessageId())
			if s.embedded != nil {
				fmt.Fprintln(g.stderr, "decree: no daemon serves this project; run `decreectl process` to go on")
			}
			return nil
		}),
	}
	cmd.Flags().StringVarP(&note, "message", "m", "", "a note for the routine (or the reviewer's reason)")
	cmd.Flags().StringVarP(&file, "file", "f", "", "read the note from FILE (- for standard input)")
	cmd.Flags().StringVar(&requestID, "request-id", "", "idempotency key: the same key and answer are acknowledged again")
	return cmd
}

// replyError maps a refused reply to an exit status by its gRPC code.
func replyError(err error) error {
	code := 1
	switch status.Code(err) {
	case codes.FailedPrecondition:
		code = 4
	case codes.InvalidArgument:
		code = 2
	case codes.AlreadyExists:
		code = 5
	}
	return &exitError{code: code, msg: describe(err).Error()}
}

func newRequestID() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return "reply-" + hex.EncodeToString(b)
}
