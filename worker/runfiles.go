package worker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"

	"github.com/decreehq/decree/pkg/fsutil"
	decreev1 "github.com/decreehq/decree/proto/decree/v1"
)

// writeRunFiles writes Assignment.run_files into <workspace>/<message_dir>/,
// confined to the workspace. A file listed with fetch set (too large to
// travel in the assignment, such as a large message.md) is streamed from
// the controller with GetRunFile straight into place.
func (w *worker) writeRunFiles(ctx context.Context, a *decreev1.Assignment) error {
	if len(a.GetRunFiles()) == 0 {
		return nil
	}
	ws := w.workspace
	dir := a.GetMessageDir()
	if dir == "" {
		return fmt.Errorf("assignment for %s carries run files but no message_dir; the controller must name the run directory", a.GetMessageId())
	}
	if err := mkdirConfined(ws, dir); err != nil {
		return fmt.Errorf("create run directory of %s: %w", a.GetMessageId(), err)
	}
	for _, f := range a.GetRunFiles() {
		if err := fsutil.CheckName("run file", f.GetName()); err != nil {
			return fmt.Errorf("place run files of %s: %w", a.GetMessageId(), err)
		}
		full, err := fsutil.ConfinedJoin(ws, path.Join(dir, f.GetName()))
		if err != nil {
			return fmt.Errorf("place run file %s of %s: %w", f.GetName(), a.GetMessageId(), err)
		}
		if f.GetFetch() {
			if err := w.fetchRunFile(ctx, a.GetLeaseToken(), f, full); err != nil {
				return fmt.Errorf("fetch run file %s of %s: %w", f.GetName(), a.GetMessageId(), err)
			}
			continue
		}
		if old, err := os.ReadFile(full); err == nil && bytes.Equal(old, f.GetContent()) {
			continue // a worker in the controller's tree finds the files in place
		}
		if err := fsutil.WriteFileAtomic(full, f.GetContent(), 0o644); err != nil {
			return fmt.Errorf("place run file of %s: %w", a.GetMessageId(), err)
		}
	}
	return nil
}

// fetchRunFile streams a run file from the controller into full, checking
// that the pieces arrive in order and add up to the announced size.
func (w *worker) fetchRunFile(ctx context.Context, token string, f *decreev1.RunFile, full string) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := w.client.GetRunFile(ctx, &decreev1.GetRunFileRequest{LeaseToken: token, Name: f.GetName()})
	if err != nil {
		return err
	}
	return fsutil.WriteFileAtomicFunc(full, 0o644, func(out io.Writer) error {
		var got uint64
		for {
			resp, err := stream.Recv()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return err
			}
			if resp.GetOffset() != got {
				return fmt.Errorf("piece at offset %d, expected %d", resp.GetOffset(), got)
			}
			if _, err := out.Write(resp.GetData()); err != nil {
				return err
			}
			got += uint64(len(resp.GetData()))
		}
		if got != f.GetSize() {
			return fmt.Errorf("got %d bytes, the assignment announced %d", got, f.GetSize())
		}
		return nil
	})
}
