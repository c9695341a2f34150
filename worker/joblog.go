package worker

import (
	"context"
	"fmt"
	"io"
	"log/slog"

	decreev1 "github.com/decreehq/decree/proto/decree/v1"
	"github.com/decreehq/decree/worker/logship"
)

// jobLog carries one assignment's output to the controller's log.
type jobLog struct {
	out   io.Writer     // what the routine's output is written to
	close func()        // no more output
	wait  func() uint64 // waits for the upload to end; the bytes written
}

// startLog starts shipping an assignment's log. Work outside any message
// (beforeAll/afterAll hooks, naming a new message) has no run directory to
// keep a log in: its output is dropped rather than uploaded. A controller
// in this process (Options.Logs) stores each write at once (logship.Direct);
// over the connection a bounded window and an uploader resend what a
// dropped connection lost (logship.Buffer, logship.Uploader). Either way a
// refusal of the log (the lease is gone) stops the work through cancel.
func (w *worker) startLog(drain context.Context, a *decreev1.Assignment, token, stream string, log *slog.Logger, cancel context.CancelCauseFunc) *jobLog {
	refused := func(err error) {
		if logship.Permanent(err) {
			cancel(fmt.Errorf("the controller refused the log (lease lost?): %w", err))
		}
	}
	if a.GetMessageId() == "" {
		return &jobLog{out: io.Discard, close: func() {}, wait: func() uint64 { return 0 }}
	}
	if w.opts.Logs != nil {
		d := &logship.Direct{Client: w.opts.Logs, LeaseToken: token, MessageID: a.GetMessageId(), Attempt: a.GetAttempt(),
			Stream: stream, Logger: log, Backoff: w.opts.Backoff, Ctx: drain}
		out := writerFunc(func(p []byte) (int, error) {
			n, err := d.Write(p)
			if err != nil {
				refused(err)
			}
			return n, err
		})
		return &jobLog{out: out,
			close: func() {
				if err := d.Close(); err != nil {
					log.Error("log upload did not finish; the controller's log is incomplete", "stream", stream, "written", d.Size(), "err", err)
				}
			},
			wait: d.Size,
		}
	}
	buf := logship.NewBuffer(w.opts.LogBufferBytes)
	up := &logship.Uploader{
		Client:     w.client,
		LeaseToken: token,
		MessageID:  a.GetMessageId(),
		Attempt:    a.GetAttempt(),
		Stream:     stream,
		Buffer:     buf,
		Logger:     log,
		Backoff:    w.opts.Backoff,
	}
	upDone := make(chan error, 1)
	go func() {
		err := up.Run(drain)
		if err != nil {
			buf.Abort(err)
			refused(err)
		}
		upDone <- err
	}()
	return &jobLog{out: buf,
		close: func() { _ = buf.Close() },
		wait: func() uint64 {
			if err := <-upDone; err != nil {
				log.Error("log upload did not finish; the controller's log is incomplete", "stream", stream, "written", buf.Size(), "acked", buf.Acked(), "err", err)
			}
			return buf.Size()
		},
	}
}

// writerFunc is an io.Writer made of a function.
type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
