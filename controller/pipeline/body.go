package pipeline

import (
	"bytes"
	"fmt"
	"io"

	"github.com/decreehq/decree/controller/store"
)

// routerBodyLimit is how much of a message body goes into a router prompt
// (choosing a routine, naming a message). The router needs the gist of the
// task, and the prompt travels in an assignment held in memory on both
// sides, so a body of tens of megabytes is cut here, saying so.
const routerBodyLimit = 64 << 10

// bodyForRouter reads at most routerBodyLimit bytes of r; when there is
// more, a note saying how much was left out follows.
func bodyForRouter(r io.Reader) ([]byte, error) {
	head, err := io.ReadAll(io.LimitReader(r, routerBodyLimit))
	if err != nil {
		return nil, err
	}
	rest, err := io.Copy(io.Discard, r)
	if err != nil {
		return nil, err
	}
	if rest > 0 {
		head = fmt.Appendf(head, "\n[... %d more bytes of the task left out ...]\n", rest)
	}
	return head, nil
}

// submittedBody is the body of a submission for the router: from memory,
// or read from the start of sub.BodyFrom.
func submittedBody(sub Submission) ([]byte, error) {
	if sub.BodyFrom == nil {
		return bodyForRouter(bytes.NewReader(sub.Body))
	}
	if _, err := sub.BodyFrom.Seek(0, io.SeekStart); err != nil {
		return nil, err
	}
	return bodyForRouter(sub.BodyFrom)
}

// queuedBody is the body of a queued message for the router, read from
// its inbox file.
func (p *Pipeline) queuedBody(e store.Entry) ([]byte, error) {
	if e.Message != nil && e.Message.Body != nil {
		return bodyForRouter(bytes.NewReader(e.Message.Body))
	}
	b, err := p.d.Store.OpenBody(store.MessageView{Name: e.Name(), State: store.StateQueued})
	if err != nil {
		return nil, err
	}
	defer b.Close()
	return bodyForRouter(b)
}
