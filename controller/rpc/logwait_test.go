package rpc

import (
	"bytes"
	"context"
	"io"
	"testing"
	"time"

	"github.com/decreehq/decree/controller/lease"
	"github.com/decreehq/decree/controller/logbook"
	"github.com/decreehq/decree/controller/store"
	"github.com/decreehq/decree/pkg/message"
	decreev1 "github.com/decreehq/decree/proto/decree/v1"
)

// TestFollowLogsWaitsForTheAttempt: `decreectl logs -f ID` asks for the
// latest attempt's log while the run has no attempt yet (its checkpoint
// is being taken). The call must wait and then stream the log, not fail
// with "no such file".
func TestFollowLogsWaitsForTheAttempt(t *testing.T) {
	dir := t.TempDir()
	st, book, m := newDomain(t, dir, 0)
	defer m.Close()
	client := controllerClient(t, ControllerDeps{Store: st, Leases: m})

	e, err := st.CreateMessage("watched", &message.Message{Body: []byte("work\n")})
	if err != nil {
		t.Fatal(err)
	}
	run, err := st.StartRun(store.RunStart{Entry: e, Routine: "develop", Trigger: "inbox", MaxAttempts: 3})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	got := make(chan string, 1)
	go func() {
		stream, err := client.WatchLogs(ctx, &decreev1.WatchLogsRequest{MessageId: e.ID, Follow: true})
		if err != nil {
			got <- "error: " + err.Error()
			return
		}
		var out bytes.Buffer
		for {
			resp, err := stream.Recv()
			if err == io.EOF {
				got <- out.String()
				return
			}
			if err != nil {
				got <- "error: " + err.Error()
				return
			}
			out.Write(resp.GetChunk().GetData())
		}
	}()
	select {
	case s := <-got:
		t.Fatalf("WatchLogs returned before the attempt began: %q", s)
	case <-time.After(300 * time.Millisecond):
	}
	a, err := run.BeginAttempt()
	if err != nil {
		t.Fatal(err)
	}
	book.Begin(e.ID, a.N)
	if _, err := book.Append(logbook.Key{MessageID: e.ID, Attempt: a.N, Stream: lease.DefaultStream}, 0, []byte("routine output\n")); err != nil {
		t.Fatal(err)
	}
	book.End(e.ID, a.N)
	select {
	case s := <-got:
		if s != "routine output\n" {
			t.Fatalf("followed log: %q", s)
		}
	case <-ctx.Done():
		t.Fatal("WatchLogs did not finish after the attempt ended")
	}
}
