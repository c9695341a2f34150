package fsutil

import (
	"errors"
	"io/fs"
	"os"
	"syscall"
	"testing"
)

func TestLinkUnsupported(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{&os.LinkError{Op: "link", Err: syscall.EPERM}, true},
		{&os.LinkError{Op: "link", Err: syscall.ENOTSUP}, true},
		{&os.LinkError{Op: "link", Err: syscall.EEXIST}, false},
		{&os.LinkError{Op: "link", Err: syscall.ENOENT}, false},
		{fs.ErrExist, false},
		{errors.New("other"), false},
	} {
		if got := LinkUnsupported(tc.err); got != tc.want {
			t.Errorf("LinkUnsupported(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}
