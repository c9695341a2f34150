package rpc

import (
	"testing"

	"github.com/decreehq/decree/controller/store"
	"github.com/decreehq/decree/pkg/message"
)

// A follow-up collected from the outbox is listed under its outbox file's
// name; any other message under its inbox file's.
func TestMessageInfoName(t *testing.T) {
	fromOutbox := &message.Message{HasFrontmatter: true}
	fromOutbox.Set(message.OutboxFileField, "write-summary.md")
	for _, tc := range []struct {
		view store.MessageView
		want string
	}{
		{store.MessageView{ID: "2026010100000000-1", Name: "2026010100000000-1", Message: fromOutbox}, "write-summary"},
		{store.MessageView{ID: "2026010100000000-0", Name: "fix-types", Message: &message.Message{}}, "fix-types"},
		{store.MessageView{ID: "2026010100000000-2", Name: "2026010100000000-2"}, "2026010100000000-2"},
	} {
		if got := messageInfo(tc.view).GetName(); got != tc.want {
			t.Errorf("name of %s = %q, want %q", tc.view.ID, got, tc.want)
		}
	}
}
