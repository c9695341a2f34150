package store

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/decreehq/decree/pkg/fsutil"
	"github.com/decreehq/decree/pkg/layout"
	"github.com/decreehq/decree/pkg/message"
)

// Message bodies
//
// The store never holds a message body in memory: inbox entries, listings
// and views carry the frontmatter only (Message.Body is nil), and every
// write of a message (a new message, a chain id written back, a follow-up
// renumbered, the copy into runs/<id>/message.md) reads the frontmatter
// with message.ReadHead and streams the body from file to file. A body is
// read only on request, as a stream (OpenBody).

// readHeadFile reads the frontmatter of the message file at path. The
// body is not read.
func readHeadFile(path string) (*message.Message, error) {
	f, err := fsutil.OpenRegular(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	h, err := message.ReadHead(f)
	if err != nil {
		return nil, err
	}
	return h.Message, nil
}

// rewriteFile writes m's frontmatter followed by the body of the message
// file src to dst, crash-safely (dst may be src: the file is replaced by a
// rename once the copy is complete). With sync the file and its directory
// are fsynced; without, the caller makes them durable later (see
// Run.Commit).
func rewriteFile(dst, src string, m *message.Message, sync bool) error {
	f, err := fsutil.OpenRegular(src)
	if err != nil {
		return err
	}
	defer f.Close()
	h, err := message.ReadHead(f)
	if err != nil {
		return err
	}
	write := func(w io.Writer) error {
		_, err := m.RenderTo(w, h.Body)
		return err
	}
	if sync {
		return fsutil.WriteFileAtomicFunc(dst, 0o644, write)
	}
	return fsutil.ReplaceFileFuncUnsynced(dst, 0o644, write)
}

// NewBodyFile creates a temporary file in .decree/ for a message body
// that arrives in pieces (a streamed submission). It is named like the
// store's other temporary files, so Open removes it when the controller
// stopped before it was used; the caller removes it when done.
func (s *Store) NewBodyFile() (*os.File, error) {
	f, err := os.CreateTemp(s.dir, ".submitted-body.tmp-*")
	if err != nil {
		return nil, fmt.Errorf("store the message body: %w", err)
	}
	return f, nil
}

// BodyReader is a message body opened for reading.
type BodyReader struct {
	io.Reader
	// Size is the body's size in bytes.
	Size int64
	f    *os.File
}

// Close closes the message file.
func (b *BodyReader) Close() error { return b.f.Close() }

// OpenBody opens the body of a listed message (queued, done or dead) for
// streaming.
func (s *Store) OpenBody(v MessageView) (*BodyReader, error) {
	dir := layout.Inbox
	switch v.State {
	case StateDone:
		dir = layout.Done
	case StateDead:
		dir = layout.Dead
	}
	p := s.path(dir, v.Name+layout.MessageExt)
	f, err := fsutil.OpenRegular(p)
	if err != nil {
		return nil, fmt.Errorf("read the body of message %s: %w", v.Name, err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("read the body of message %s: %w", v.Name, err)
	}
	h, err := message.ReadHead(f)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("read the body of message %s: %w", v.Name, err)
	}
	return &BodyReader{Reader: h.Body, Size: fi.Size() - h.Offset, f: f}, nil
}

// writeRunMessage writes runs/<id>/message.md: the entry's frontmatter
// followed by the body of its inbox file (or the entry's own body, when it
// carries one). It is written without an fsync: the run's first Commit
// makes it durable.
func (s *Store) writeRunMessage(dir string, e Entry) error {
	dst := filepath.Join(dir, layout.MessageFile)
	if e.Message.Body != nil {
		return fsutil.ReplaceFileUnsynced(dst, e.Message.Render(), 0o644)
	}
	err := rewriteFile(dst, s.path(layout.Inbox, e.File), e.Message, false)
	if errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("copy message %s into its run directory: the file is no longer in the inbox: %w", e.File, err)
	}
	return err
}
