package lease

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/decreehq/decree/controller/logbook"
	decreev1 "github.com/decreehq/decree/proto/decree/v1"
)

// TestUploadLogLimits: an oversized chunk and one stream too many are
// refused as invalid requests (the worker does not retry them), with
// errors that say which limit was hit.
func TestUploadLogLimits(t *testing.T) {
	m, _ := newClockedManager(t, Options{})
	w := streamWorker(t, m, "w")
	res := dispatchAsync(m, "20261124120000-0", 1)
	a := w.next(t)
	chunk := func(stream string, data []byte) *decreev1.LogChunk {
		return &decreev1.LogChunk{MessageId: a.GetMessageId(), Attempt: a.GetAttempt(), Stream: stream, Data: data}
	}
	_, _, err := m.UploadLog(a.GetLeaseToken(), chunk("routine", make([]byte, 32<<20)))
	if !errors.Is(err, ErrInvalid) || !errors.Is(err, logbook.ErrChunkTooLarge) {
		t.Fatalf("32 MiB chunk: %v, want ErrInvalid and ErrChunkTooLarge", err)
	}
	for i := 0; i < logbook.DefaultMaxStreams; i++ {
		if _, _, err := m.UploadLog(a.GetLeaseToken(), chunk(fmt.Sprintf("s%d", i), []byte("x"))); err != nil {
			t.Fatal(err)
		}
	}
	_, _, err = m.UploadLog(a.GetLeaseToken(), chunk("extra", []byte("x")))
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "log streams") {
		t.Fatalf("stream %d: %v, want ErrInvalid about log streams", logbook.DefaultMaxStreams+1, err)
	}
	if _, err := m.Complete(&decreev1.CompleteAssignmentRequest{LeaseToken: a.GetLeaseToken(), Status: &decreev1.ExitStatus{}}); err != nil {
		t.Fatal(err)
	}
	<-res
}
