package rpc

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"github.com/decreehq/decree/controller/store"
	decreev1 "github.com/decreehq/decree/proto/decree/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// GetArtifact streams a run-directory file. Only regular files directly
// inside the run directory are served: a routine can put anything there
// (a symbolic link to a file outside the project, a FIFO that would block
// the call forever), so the file is opened without following a link
// (O_NOFOLLOW) and without blocking (O_NONBLOCK), and refused unless fstat
// says it is a regular file.
func (s *ControllerServer) GetArtifact(req *decreev1.GetArtifactRequest, stream decreev1.ControllerService_GetArtifactServer) error {
	if err := store.CheckID(req.GetMessageId()); err != nil {
		return Status(err)
	}
	run, err := s.d.Store.OpenRun(req.GetMessageId())
	if err != nil {
		return Status(err)
	}
	p, err := run.Path(req.GetName())
	if err != nil {
		return Status(err)
	}
	f, size, err := openArtifact(p)
	if err != nil {
		return status.Errorf(codes.NotFound, "run %s has no artifact %s: %v (ListRuns lists each run's artifacts)", req.GetMessageId(), req.GetName(), err)
	}
	defer f.Close()
	if req.GetOffset() > size {
		return status.Errorf(codes.OutOfRange, "offset %d is past the end of %s (%d bytes)", req.GetOffset(), req.GetName(), size)
	}
	if _, err := f.Seek(int64(req.GetOffset()), 0); err != nil {
		return Status(err)
	}
	return Status(sendReader(f, req.GetOffset(), func(off uint64, data []byte) error {
		return stream.Send(&decreev1.GetArtifactResponse{Offset: off, Data: data, Size: size})
	}))
}

// openArtifact opens p for reading if it is a regular file, in a run
// directory that is itself no link; the error says what it is otherwise.
func openArtifact(p string) (*os.File, uint64, error) {
	if fi, err := os.Lstat(filepath.Dir(p)); err != nil || !fi.IsDir() {
		return nil, 0, fmt.Errorf("the run directory is not a directory")
	}
	f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		if fi, lerr := os.Lstat(p); lerr == nil && fi.Mode()&os.ModeSymlink != 0 {
			return nil, 0, fmt.Errorf("it is a symbolic link; only regular files are served")
		}
		if os.IsNotExist(err) {
			return nil, 0, fmt.Errorf("no such file")
		}
		return nil, 0, fmt.Errorf("it cannot be opened (%v)", errors.Unwrap(err))
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, 0, fmt.Errorf("stat: %w", err)
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, 0, fmt.Errorf("it is not a regular file (%s); only regular files are served", fi.Mode().Type())
	}
	return f, uint64(fi.Size()), nil
}
