package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	decreev1 "github.com/decreehq/decree/proto/decree/v1"
)

// submitChunk is the size of the body pieces decreectl sends.
const submitChunk = 1 << 20

// errBodyTooLarge is returned when a body goes over maxBodyBytes.
var errBodyTooLarge = fmt.Errorf("the message body is over %d MiB, the most one message may carry; put the content in a file in the project and name it in the message (e.g. -v input_file=PATH)", maxBodyBytes>>20)

// checkBodySize refuses, before anything is sent, a body on standard
// input that is a regular file over the limit (a pipe is counted while it
// is sent).
func checkBodySize(in io.Reader) error {
	f, ok := in.(*os.File)
	if !ok {
		return nil
	}
	if fi, err := f.Stat(); err == nil && fi.Mode().IsRegular() && fi.Size() > maxBodyBytes {
		return errBodyTooLarge
	}
	return nil
}

// submitStream queues a message whose body is read from body in pieces
// (SubmitMessageStream), so that neither decreectl nor the controller
// holds it whole. A body that grows over maxBodyBytes is abandoned (the
// call is cancelled, nothing is queued) with errBodyTooLarge.
func submitStream(ctx context.Context, client decreev1.ControllerServiceClient, hdr *decreev1.SubmitMessageRequest, body io.Reader) (*decreev1.SubmitMessageStreamResponse, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	st, err := client.SubmitMessageStream(ctx)
	if err != nil {
		return nil, err
	}
	closeAndRecv := func() (*decreev1.SubmitMessageStreamResponse, error) { return st.CloseAndRecv() }
	if err := st.Send(&decreev1.SubmitMessageStreamRequest{Part: &decreev1.SubmitMessageStreamRequest_Header{Header: hdr}}); err != nil {
		return closeAndRecv() // the controller refused: its status says why
	}
	buf := make([]byte, submitChunk)
	var total int64
	for {
		n, rerr := io.ReadFull(body, buf)
		if n > 0 {
			total += int64(n)
			if total > maxBodyBytes {
				return nil, errBodyTooLarge
			}
			if err := st.Send(&decreev1.SubmitMessageStreamRequest{Part: &decreev1.SubmitMessageStreamRequest_BodyChunk{BodyChunk: buf[:n]}}); err != nil {
				return closeAndRecv()
			}
		}
		if errors.Is(rerr, io.EOF) || errors.Is(rerr, io.ErrUnexpectedEOF) {
			return closeAndRecv()
		}
		if rerr != nil {
			return nil, fmt.Errorf("read the message body: %w", rerr)
		}
	}
}

// replayable is a body that can be sent again when a submission is
// retried (the controller stopped meanwhile): when nothing of it was read
// yet, or when it can seek back to its start (a file, a -p prompt).
type replayable struct {
	r    io.Reader
	read int64
}

func newReplayable(r io.Reader) *replayable { return &replayable{r: r} }

func (b *replayable) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	b.read += int64(n)
	return n, err
}

// rewind goes back to the start of the body; false when it cannot.
func (b *replayable) rewind() bool {
	if b.read == 0 {
		return true
	}
	s, ok := b.r.(io.Seeker)
	if !ok {
		return false
	}
	if _, err := s.Seek(0, io.SeekStart); err != nil {
		return false
	}
	b.read = 0
	return true
}
