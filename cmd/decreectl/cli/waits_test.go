package cli

import (
	"bytes"
	"testing"
	"time"

	decreev1 "github.com/decreehq/decree/proto/decree/v1"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// TestPrintWaits: each wait shows its id, kind, message, attempt, age,
// deadline, question, options with meanings and the reply command.
func TestPrintWaits(t *testing.T) {
	now := time.Date(2026, 5, 21, 12, 0, 0, 0, time.UTC)
	waits := []*decreev1.Wait{
		{Id: "2026052111000000-0-w1", MessageId: "2026052111000000-0", Kind: "ask", Attempt: 1,
			Question: "Indent with tabs?\nThe style guide says nothing.",
			Options:  []*decreev1.WaitOption{{Name: "yes", Meaning: "use tabs"}, {Name: "no", Meaning: "use spaces"}},
			Asked:    timestamppb.New(now.Add(-90 * time.Minute)), Deadline: timestamppb.New(now.Add(22*time.Hour + 30*time.Minute)),
			ReplyCommand: "decreectl reply 2026052111000000-0-w1 OPTION [-m NOTE]"},
		{Id: "2026052111300000-2-w2", MessageId: "2026052111300000-2", Kind: "review", Attempt: 2,
			Question: "Review the change of attempt 2.",
			Options:  []*decreev1.WaitOption{{Name: "approve"}, {Name: "reject"}, {Name: "retry"}},
			Asked:    timestamppb.New(now.Add(-5 * time.Second)), ReplyCommand: "decreectl reply 2026052111300000-2-w2 OPTION [-m NOTE]"},
	}
	var b bytes.Buffer
	printWaits(&b, waits, now)
	golden(t, "waits.golden", b.String())
}
