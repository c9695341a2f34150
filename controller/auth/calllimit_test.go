package auth

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pauth "github.com/decreehq/decree/pkg/auth"
	decreev1 "github.com/decreehq/decree/proto/decree/v1"
)

// TestCallsPerHostAreBounded: one address holds at most MaxCallsPerHost
// calls in flight, over any number of connections; the next is refused as
// ResourceExhausted, and a finished call frees its place.
func TestCallsPerHostAreBounded(t *testing.T) {
	f := newFixture(t)
	addr := serve(t, f.config(), "")
	conns := []*grpc.ClientConn{
		dialAs(t, addr, pauth.ClientOptions{Token: clientToken, CAFile: f.caFile}),
		dialAs(t, addr, pauth.ClientOptions{Token: clientToken, CAFile: f.caFile}),
	}
	open := func(i int) (context.CancelFunc, error) {
		c, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		st, err := decreev1.NewControllerServiceClient(conns[i%2]).WatchLogs(c, &decreev1.WatchLogsRequest{})
		if err == nil {
			_, err = st.Recv() // the call was admitted once its first response comes
		}
		return cancel, err
	}
	var cancels []context.CancelFunc
	defer func() {
		for _, c := range cancels {
			c()
		}
	}()
	for i := 0; i < MaxCallsPerHost; i++ {
		cancel, err := open(i)
		cancels = append(cancels, cancel)
		if err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	cancel, err := open(MaxCallsPerHost)
	cancels = append(cancels, cancel)
	if status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("call %d: %v, want ResourceExhausted", MaxCallsPerHost+1, err)
	}
	cancels[0]()
	deadline := time.Now().Add(10 * time.Second)
	for {
		cancel, err := open(0)
		cancels = append(cancels, cancel)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a finished call did not free its place: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
