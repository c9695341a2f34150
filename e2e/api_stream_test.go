package e2e

import (
	"bytes"
	"errors"
	"io"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/decreehq/decree/pkg/auth"
	decreev1 "github.com/decreehq/decree/proto/decree/v1"
)

// streamSubmit sends a SubmitMessageStream: the header, then body in
// pieces of chunk bytes (0: one piece), and returns the controller's
// answer.
func (e *apiEnv) streamSubmit(t *testing.T, first *decreev1.SubmitMessageStreamRequest, body []byte, chunk int) (*decreev1.SubmitMessageStreamResponse, error) {
	t.Helper()
	st, err := e.client.SubmitMessageStream(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if first != nil {
		if err := st.Send(first); err != nil {
			return st.CloseAndRecv()
		}
	}
	if chunk <= 0 {
		chunk = len(body) + 1
	}
	for len(body) > 0 {
		n := min(chunk, len(body))
		if err := st.Send(&decreev1.SubmitMessageStreamRequest{Part: &decreev1.SubmitMessageStreamRequest_BodyChunk{BodyChunk: body[:n]}}); err != nil {
			return st.CloseAndRecv()
		}
		body = body[n:]
	}
	return st.CloseAndRecv()
}

func header(req *decreev1.SubmitMessageRequest) *decreev1.SubmitMessageStreamRequest {
	return &decreev1.SubmitMessageStreamRequest{Part: &decreev1.SubmitMessageStreamRequest_Header{Header: req}}
}

// TestAPISubmitStream: a body sent in pieces is queued byte for byte (a
// body that starts with a "---" line and holds binary bytes included), is
// the same submission as a unary call with the same request_id, and bad
// streams are refused with nothing queued: no header, a body in the header,
// a second header, an unknown routine (refused on the header), a body over
// the limit.
func TestAPISubmitStream(t *testing.T) {
	e := newAPIEnv(t)
	echo := []*decreev1.Field{{Key: "routine", Value: "echo"}}
	body := append([]byte("---\nnot: frontmatter\n---\n"), bytes.Repeat([]byte{0, 1, 2, 0xff, '\n', '-'}, 100000)...)
	req := &decreev1.SubmitMessageRequest{Name: "streamed", Fields: echo, RequestId: "stream-key"}
	resp, err := e.streamSubmit(t, header(req), body, 64<<10)
	if err != nil {
		t.Fatal(err)
	}
	id := resp.GetMessage().GetId()
	if w := e.watch(t, id, "", 0); w.outcome.GetState() != decreev1.MessageState_MESSAGE_STATE_DONE {
		t.Fatalf("outcome %v", w.outcome)
	}
	gm, err := e.client.GetMessage(e.ctx, &decreev1.GetMessageRequest{Id: id})
	if err != nil || !bytes.Equal(gm.GetBody(), body) || gm.GetBodyOmitted() || gm.GetBodySize() != uint64(len(body)) {
		t.Fatalf("GetMessage: %d body bytes (equal %v), omitted %v, size %d, %v", len(gm.GetBody()), bytes.Equal(gm.GetBody(), body), gm.GetBodyOmitted(), gm.GetBodySize(), err)
	}
	if got := readBody(t, e, id); !bytes.Equal(got, body) {
		t.Errorf("GetMessageBody returned %d bytes, not the body of %d", len(got), len(body))
	}

	// One request_id names one submission through either call.
	unary := &decreev1.SubmitMessageRequest{Name: "streamed", Fields: echo, RequestId: "stream-key", Body: body}
	again, err := e.client.SubmitMessage(e.ctx, unary)
	if err != nil || !again.GetReplayed() || again.GetMessage().GetId() != id {
		t.Errorf("unary retry of a streamed submission: %v, %v; want replayed %s", again, err, id)
	}
	if _, err := e.streamSubmit(t, header(req), body[:10], 0); status.Code(err) != codes.AlreadyExists {
		t.Errorf("same request_id, another body: %v, want AlreadyExists", err)
	}

	for _, tc := range []struct {
		name  string
		first *decreev1.SubmitMessageStreamRequest
		body  []byte
		want  codes.Code
	}{
		{"no header", nil, []byte("x"), codes.InvalidArgument},
		{"empty stream", nil, nil, codes.InvalidArgument},
		{"body in the header", header(&decreev1.SubmitMessageRequest{Name: "b", Body: []byte("x"), Fields: echo}), nil, codes.InvalidArgument},
		{"unknown routine", header(&decreev1.SubmitMessageRequest{Name: "u", Fields: []*decreev1.Field{{Key: "routine", Value: "nope"}}}), []byte("x"), codes.FailedPrecondition},
		{"over the limit", header(&decreev1.SubmitMessageRequest{Name: "huge", Fields: echo}), make([]byte, auth.MaxBodyBytes+1), codes.ResourceExhausted},
	} {
		if _, err := e.streamSubmit(t, tc.first, tc.body, 1<<20); status.Code(err) != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
	st, err := e.client.SubmitMessageStream(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	st.Send(header(&decreev1.SubmitMessageRequest{Name: "twice", Fields: echo}))
	st.Send(header(&decreev1.SubmitMessageRequest{Name: "twice", Fields: echo}))
	if _, err := st.CloseAndRecv(); status.Code(err) != codes.InvalidArgument {
		t.Errorf("a second header: %v, want InvalidArgument", err)
	}
	list, err := e.client.ListMessages(e.ctx, &decreev1.ListMessagesRequest{})
	if err != nil || len(list.GetMessages()) != 1 {
		t.Errorf("refused streams queued something: %v %v", list.GetMessages(), err)
	}
}

func readBody(t *testing.T, e *apiEnv, id string) []byte {
	t.Helper()
	st, err := e.client.GetMessageBody(e.ctx, &decreev1.GetMessageBodyRequest{Id: id})
	if err != nil {
		t.Fatal(err)
	}
	var out []byte
	for {
		r, err := st.Recv()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		if r.GetOffset() != uint64(len(out)) {
			t.Fatalf("piece at offset %d, want %d", r.GetOffset(), len(out))
		}
		out = append(out, r.GetData()...)
	}
}
