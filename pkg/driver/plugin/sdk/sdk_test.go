package sdk

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/decreehq/decree/pkg/driver"
	decreev1 "github.com/decreehq/decree/proto/decree/v1"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/durationpb"
)

// slowDriver's Start blocks until release is closed, so a test can send
// Stop while the execution is still starting.
type slowDriver struct {
	release chan struct{}
	h       *fakeHandle
}

func (d *slowDriver) Name() string { return "slow" }
func (d *slowDriver) Start(ctx context.Context, cfg driver.TaskConfig) (driver.Handle, error) {
	<-d.release
	return d.h, nil
}

// fakeHandle runs until Stop is called.
type fakeHandle struct {
	once    sync.Once
	stopped chan struct{}
	events  chan driver.Event
}

func (h *fakeHandle) Events() <-chan driver.Event { return h.events }
func (h *fakeHandle) Wait(ctx context.Context) (driver.ExitResult, error) {
	select {
	case <-h.stopped:
		return driver.ExitResult{ExitCode: 143, Stopped: true}, nil
	case <-ctx.Done():
		return driver.ExitResult{}, ctx.Err()
	}
}
func (h *fakeHandle) Stop(time.Duration) error {
	h.once.Do(func() {
		h.events <- driver.Event{Kind: driver.EventExit, Exit: driver.ExitResult{ExitCode: 143, Stopped: true}}
		close(h.events)
		close(h.stopped)
	})
	return nil
}

// stream collects what Execute sends.
type stream struct {
	grpc.ServerStream
	ctx  context.Context
	mu   sync.Mutex
	sent []*decreev1.ExecuteResponse
}

func (s *stream) Context() context.Context { return s.ctx }
func (s *stream) Send(r *decreev1.ExecuteResponse) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sent = append(s.sent, r)
	return nil
}

// A Stop that arrives while the routine is still starting must not be
// lost: the routine is stopped as soon as it has started.
func TestStopDuringStartIsHonoured(t *testing.T) {
	h := &fakeHandle{stopped: make(chan struct{}), events: make(chan driver.Event, 1)}
	d := &slowDriver{release: make(chan struct{}), h: h}
	srv := NewServer(d, Options{})
	st := &stream{ctx: context.Background()}
	done := make(chan error, 1)
	go func() {
		done <- srv.Execute(&decreev1.ExecuteRequest{ExecutionId: "x", RoutinePath: "/r.sh"}, st)
	}()
	// Wait until Execute has reserved the id, then stop before Start returns.
	deadline := time.Now().Add(5 * time.Second)
	for {
		srv.mu.Lock()
		_, reserved := srv.running["x"]
		srv.mu.Unlock()
		if reserved {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("Execute never reserved the execution id")
		}
		time.Sleep(time.Millisecond)
	}
	if _, err := srv.Stop(context.Background(), &decreev1.StopRequest{ExecutionId: "x", Grace: durationpb.New(time.Second)}); err != nil {
		t.Fatal(err)
	}
	close(d.release)
	select {
	case <-h.stopped:
	case <-time.After(5 * time.Second):
		t.Fatal("a Stop sent during start was lost: the routine kept running")
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Execute did not return after the routine stopped")
	}
}
