package dashboard

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"unicode/utf8"

	decreev1 "github.com/decreehq/decree/proto/decree/v1"
)

const (
	// logPage is how much of a log one page shows.
	logPage = 256 << 10
	// liveTail is how much of a running log the message page starts with.
	liveTail = 64 << 10
	// liveMax is how much one live view appends before it stops and
	// points to the paged view, so a routine printing gigabytes cannot
	// grow a browser tab without bound.
	liveMax = 4 << 20
)

// readArtifact reads at most limit bytes of a run file from offset and
// returns them with the file's size; it stops the stream once it has
// enough, so the controller sends no more than that.
func (s *Server) readArtifact(ctx context.Context, id, name string, offset uint64, limit int) ([]byte, uint64, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := s.c.GetArtifact(ctx, &decreev1.GetArtifactRequest{MessageId: id, Name: name, Offset: offset})
	if err != nil {
		return nil, 0, err
	}
	var (
		out  []byte
		size uint64
	)
	for len(out) < limit {
		resp, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, 0, err
		}
		size = resp.GetSize()
		d := resp.GetData()
		if room := limit - len(out); len(d) > room {
			d = d[:room]
		}
		out = append(out, d...)
	}
	if size == 0 {
		size = offset + uint64(len(out))
	}
	return out, size, nil
}

// artifactSize is a run file's size, read from the first piece only.
func (s *Server) artifactSize(ctx context.Context, id, name string) (uint64, error) {
	_, size, err := s.readArtifact(ctx, id, name, 0, 1)
	return size, err
}

type logView struct {
	ID       string
	Attempt  int32
	Attempts []*decreev1.AttemptInfo
	Name     string
	Offset   uint64
	End      uint64
	Size     uint64
	Text     string
	Prev     int64 // -1: none
	Next     int64 // -1: none
	Last     uint64
	Running  bool
}

func (v logView) title() string { return fmt.Sprintf("Log of %s, attempt %d", v.ID, v.Attempt) }

// ended reports whether an attempt has an end time.
func ended(a *decreev1.AttemptInfo) bool {
	return a.GetEndTime() != nil && !a.GetEndTime().AsTime().IsZero() && a.GetEndTime().AsTime().Unix() > 0
}

// logPage shows one page of an attempt's log: by default the last page,
// with links to the previous and next pages and the raw file.
func (s *Server) logPage(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	ctx, cancel := callCtx(r)
	defer cancel()
	run, err := s.c.GetRun(ctx, &decreev1.GetRunRequest{Id: id})
	if err != nil {
		s.failRPC(w, r, "read the run of "+id, err)
		return
	}
	atts := run.GetRun().GetAttemptDetails()
	if len(atts) == 0 {
		s.fail(w, r, http.StatusNotFound, id+" has no attempt yet, so no log.")
		return
	}
	n := len(atts)
	if a, err := strconv.Atoi(r.URL.Query().Get("attempt")); err == nil && a >= 1 && a <= len(atts) {
		n = a
	}
	att := atts[n-1]
	v := logView{ID: id, Attempt: int32(n), Attempts: atts, Name: att.GetLogName(), Prev: -1, Next: -1,
		Running: !ended(att)}
	size, err := s.artifactSize(ctx, id, v.Name)
	if err != nil {
		s.failRPC(w, r, "read the log of "+id, err)
		return
	}
	v.Size = size
	v.Last = 0
	if size > logPage {
		v.Last = size - logPage
	}
	v.Offset = v.Last
	if o := r.URL.Query().Get("offset"); o != "" {
		off, err := strconv.ParseUint(o, 10, 64)
		if err != nil || off > size {
			s.fail(w, r, http.StatusBadRequest, fmt.Sprintf("offset %q: want a byte offset from 0 to %d", o, size))
			return
		}
		v.Offset = off
	}
	data, _, err := s.readArtifact(ctx, id, v.Name, v.Offset, logPage)
	if err != nil {
		s.failRPC(w, r, "read the log of "+id, err)
		return
	}
	v.Text = strings.ToValidUTF8(string(data), "\uFFFD")
	v.End = v.Offset + uint64(len(data))
	if v.Offset > 0 {
		v.Prev = max(int64(v.Offset)-logPage, 0)
	}
	if v.End < size {
		v.Next = int64(v.End)
	}
	s.render(w, r, http.StatusOK, "log", v)
}

// logStream follows a running attempt's log as server-sent "log" events
// of plain text (the page appends them as text, never as HTML), each with
// its end offset as the event id, then an "end" event when the attempt
// ends or liveMax bytes were sent.
func (s *Server) logStream(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	q := r.URL.Query()
	attempt, _ := strconv.Atoi(q.Get("attempt"))
	offset, _ := strconv.ParseUint(q.Get("offset"), 10, 64)
	if le := r.Header.Get("Last-Event-ID"); le != "" {
		if o, err := strconv.ParseUint(le, 10, 64); err == nil {
			offset = o
		}
	}
	ctx := r.Context()
	stream, err := s.c.WatchLogs(ctx, &decreev1.WatchLogsRequest{MessageId: id, Attempt: int32(attempt), Offset: offset, Follow: true})
	if err != nil {
		s.failRPC(w, r, "follow the log of "+id, err)
		return
	}
	sse, ok := startSSE(w)
	if !ok {
		return
	}
	var (
		pending []byte
		sent    int
		end     = offset
	)
	for {
		resp, err := stream.Recv()
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			if len(pending) > 0 {
				_ = sse.event("log", strconv.FormatUint(end, 10), strings.ToValidUTF8(string(pending), "\uFFFD"))
			}
			msg := "attempt finished"
			if !errors.Is(err, io.EOF) {
				msg = "log stream ended: " + err.Error()
			}
			_ = sse.event("end", "", msg)
			return
		}
		c := resp.GetChunk()
		end = c.GetOffset() + uint64(len(c.GetData()))
		text, rest := completeUTF8(append(pending, c.GetData()...))
		pending = append(pending[:0], rest...)
		if len(text) == 0 {
			continue
		}
		if err := sse.event("log", strconv.FormatUint(end-uint64(len(pending)), 10), logText(text)); err != nil {
			return
		}
		if sent += len(text); sent >= liveMax {
			_ = sse.event("end", "", fmt.Sprintf("more than %s arrived while this page was open; open the paged log for the rest", fmtBytes(liveMax)))
			return
		}
	}
}

// logText makes log bytes safe for an SSE data field: valid UTF-8, and
// carriage returns (progress bars) dropped, since a bare CR would split
// the field.
func logText(b []byte) string {
	return strings.ReplaceAll(strings.ToValidUTF8(string(b), "\uFFFD"), "\r", "")
}

// completeUTF8 splits b before an incomplete UTF-8 sequence at its end
// (the rest arrives with the next chunk).
func completeUTF8(b []byte) (complete, rest []byte) {
	for i := 1; i <= utf8.UTFMax-1 && i <= len(b); i++ {
		c := b[len(b)-i]
		if c < utf8.RuneSelf {
			break
		}
		if utf8.RuneStart(c) {
			if !utf8.FullRune(b[len(b)-i:]) {
				return b[:len(b)-i], b[len(b)-i:]
			}
			break
		}
	}
	return b, nil
}

// artifact streams a run file as plain text (never rendered as HTML).
func (s *Server) artifact(w http.ResponseWriter, r *http.Request) {
	id, name := r.PathValue("id"), r.PathValue("name")
	stream, err := s.c.GetArtifact(r.Context(), &decreev1.GetArtifactRequest{MessageId: id, Name: name})
	if err != nil {
		s.failRPC(w, r, "read "+name+" of "+id, err)
		return
	}
	streamText(s, w, r, "read "+name+" of "+id, stream.Recv, (*decreev1.GetArtifactResponse).GetData)
}

// body streams a message body as plain text.
func (s *Server) body(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	stream, err := s.c.GetMessageBody(r.Context(), &decreev1.GetMessageBodyRequest{Id: id})
	if err != nil {
		s.failRPC(w, r, "read the body of "+id, err)
		return
	}
	streamText(s, w, r, "read the body of "+id, stream.Recv, (*decreev1.GetMessageBodyResponse).GetData)
}

// streamText copies a gRPC stream of pieces to the response as plain text,
// piece by piece (nothing is held whole). An error before the first piece
// is shown as an error page; a later one cuts the response short.
func streamText[T any](s *Server, w http.ResponseWriter, r *http.Request, what string, recv func() (T, error), data func(T) []byte) {
	first, err := recv()
	if err != nil && !errors.Is(err, io.EOF) {
		s.failRPC(w, r, what, err)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	for ; err == nil; first, err = recv() {
		if _, werr := w.Write(data(first)); werr != nil {
			return
		}
	}
}
