package rpc

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/decreehq/decree/controller/store"
	"github.com/decreehq/decree/pkg/auth"
	"github.com/decreehq/decree/pkg/layout"
	decreev1 "github.com/decreehq/decree/proto/decree/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Large bodies. A message body travels whole in a unary call only when it
// is small: SubmitMessageStream receives a body in pieces straight into a
// file, GetMessage carries a body of at most InlineBodyLimit (larger ones
// are read with GetMessageBody, in pieces), and the controller never holds
// a body whole on these paths.

// InlineBodyLimit is the largest body GetMessage returns inline (1 MiB).
const InlineBodyLimit = 1 << 20

// chunkSize is the size of the pieces bodies and run files are sent in.
const chunkSize = 256 << 10

// SubmitMessageStream is SubmitMessage with the body sent in pieces after
// a header: the header is validated before any of the body is read, the
// body goes to a temporary file in .decree/ and from there into the inbox
// file, so the controller's memory does not grow with it.
func (s *ControllerServer) SubmitMessageStream(stream grpc.ClientStreamingServer[decreev1.SubmitMessageStreamRequest, decreev1.SubmitMessageStreamResponse]) error {
	first, err := stream.Recv()
	if errors.Is(err, io.EOF) {
		return status.Error(codes.InvalidArgument, "the stream ended before its header; send a header first, then the body in pieces")
	}
	if err != nil {
		return err
	}
	hdr := first.GetHeader()
	switch {
	case hdr == nil:
		return status.Error(codes.InvalidArgument, "the first request of SubmitMessageStream must carry the header (name, fields, request_id); the body follows in body_chunk requests")
	case len(hdr.GetBody()) > 0:
		return status.Error(codes.InvalidArgument, "the header must not carry a body; send the body in body_chunk requests after it")
	}
	sub := submissionOf(hdr)
	if err := s.validateSubmission(sub); err != nil {
		return err
	}
	f, err := s.d.Store.NewBodyFile()
	if err != nil {
		return Status(err)
	}
	defer func() {
		f.Close()
		_ = os.Remove(f.Name())
	}()
	h := sha256.New()
	var size int64
	for {
		req, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		if req.GetHeader() != nil {
			return status.Error(codes.InvalidArgument, "only the first request of SubmitMessageStream carries a header; the later ones carry body_chunk")
		}
		chunk := req.GetBodyChunk()
		size += int64(len(chunk))
		if size > auth.MaxBodyBytes {
			return bodyTooLarge()
		}
		h.Write(chunk)
		if _, err := f.Write(chunk); err != nil {
			return Status(fmt.Errorf("store the message body: %w", err))
		}
	}
	sub.BodyFrom = f
	resp, err := s.submit(stream.Context(), sub, hdr.GetRequestId(), submissionDigest(hdr, h.Sum(nil), size))
	if err != nil {
		return err
	}
	return stream.SendAndClose(&decreev1.SubmitMessageStreamResponse{Message: resp.GetMessage(), EventSequence: resp.GetEventSequence(), Replayed: resp.GetReplayed()})
}

// bodyTooLarge is the error of a body over auth.MaxBodyBytes, the same
// whether it came whole (SubmitMessage) or in pieces (SubmitMessageStream).
func bodyTooLarge() error {
	return status.Errorf(codes.ResourceExhausted, "the message body is over %d MiB, the most one message may carry; put the content in a file in the project and name it in the message (input_file)", auth.MaxBodyBytes>>20)
}

// GetMessage returns one message, with its body when that is at most
// InlineBodyLimit (else body_omitted: GetMessageBody streams it).
func (s *ControllerServer) GetMessage(_ context.Context, req *decreev1.GetMessageRequest) (*decreev1.GetMessageResponse, error) {
	v, err := s.d.Store.FindMessage(req.GetId())
	if err != nil {
		return nil, Status(err)
	}
	resp := &decreev1.GetMessageResponse{Message: s.withWait(s.messageView(v))}
	if v.Message == nil {
		return resp, nil // the file is not a message: no body to tell apart
	}
	b, err := s.d.Store.OpenBody(v)
	if err != nil {
		return nil, Status(err)
	}
	defer b.Close()
	resp.BodySize = uint64(b.Size)
	if b.Size > InlineBodyLimit {
		resp.BodyOmitted = true
		return resp, nil
	}
	if resp.Body, err = io.ReadAll(b); err != nil {
		return nil, Status(fmt.Errorf("read the body of %s: %w", req.GetId(), err))
	}
	return resp, nil
}

// GetMessageBody streams one message's body in pieces.
func (s *ControllerServer) GetMessageBody(req *decreev1.GetMessageBodyRequest, stream grpc.ServerStreamingServer[decreev1.GetMessageBodyResponse]) error {
	v, err := s.d.Store.FindMessage(req.GetId())
	if err != nil {
		return Status(err)
	}
	b, err := s.d.Store.OpenBody(v)
	if err != nil {
		return Status(err)
	}
	defer b.Close()
	return Status(sendReader(b, 0, func(off uint64, data []byte) error {
		return stream.Send(&decreev1.GetMessageBodyResponse{Offset: off, Data: data})
	}))
}

// sendReader passes r's bytes to send in chunks, numbering them from
// offset.
func sendReader(r io.Reader, offset uint64, send func(uint64, []byte) error) error {
	buf := make([]byte, chunkSize)
	for {
		n, err := io.ReadFull(r, buf)
		if n > 0 {
			if serr := send(offset, buf[:n]); serr != nil {
				return serr
			}
			offset += uint64(n)
		}
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// WithRunFiles lets workers fetch large run files (GetRunFile) from st's
// run directories; it returns w.
func (w *WorkerServer) WithRunFiles(st *store.Store) *WorkerServer {
	w.st = st
	return w
}

// GetRunFile streams a run file (message.md, failure-context.md) of the
// lease's message, for an assignment that lists it with fetch set.
func (w *WorkerServer) GetRunFile(req *decreev1.GetRunFileRequest, stream grpc.ServerStreamingServer[decreev1.GetRunFileResponse]) error {
	if w.st == nil {
		return status.Error(codes.Unimplemented, "this controller does not serve run files")
	}
	a, err := w.m.Active(req.GetLeaseToken())
	if err != nil {
		return Status(err)
	}
	name := req.GetName()
	if name != layout.MessageFile && name != layout.FailureContextFile {
		return status.Errorf(codes.InvalidArgument, "run file %q cannot be fetched; only %s and %s travel to workers", name, layout.MessageFile, layout.FailureContextFile)
	}
	run, err := w.st.OpenRun(a.MessageID)
	if err != nil {
		return Status(err)
	}
	p, err := run.Path(name)
	if err != nil {
		return Status(err)
	}
	return Status(sendFile(p, 0, func(off uint64, data []byte) error {
		return stream.Send(&decreev1.GetRunFileResponse{Offset: off, Data: data})
	}))
}
