package auth

import (
	"context"
	"net"
	"sync"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
)

// MaxCallsPerHost is how many calls one remote address may have in flight
// at once over TCP, on all its connections together. A worker keeps about
// five open (assignments, heartbeat, a log upload, a completion, a blob
// transfer) and decreectl a few; 64 leaves room for a host running several
// workers. With the message size limit it bounds the request bodies one
// client can make the controller hold: unauthenticated calls are refused
// on their headers (see Guard.tap), and an authenticated client holds at
// most MaxCallsPerHost calls' messages, however many connections it opens.
const MaxCallsPerHost = 64

// callLimiter counts the calls in flight per remote host.
type callLimiter struct {
	max int

	mu       sync.Mutex
	inFlight map[string]int
}

func newCallLimiter(max int) *callLimiter {
	return &callLimiter{max: max, inFlight: map[string]int{}}
}

// admit counts a new call of the stream whose context is ctx, or refuses
// it with ResourceExhausted when its host has max calls in flight. The
// count is released when the stream ends (grpc-go cancels its context).
func (l *callLimiter) admit(ctx context.Context, method string) error {
	p, ok := peer.FromContext(ctx)
	if !ok || p.Addr == nil {
		return nil
	}
	if _, local := p.AuthInfo.(unixInfo); local {
		return nil
	}
	host := p.Addr.String()
	if ta, ok := p.Addr.(*net.TCPAddr); ok {
		host = ta.IP.String()
	}
	l.mu.Lock()
	if l.inFlight[host] >= l.max {
		l.mu.Unlock()
		return status.Errorf(codes.ResourceExhausted, "%s refused: %s already has %d calls in flight, the most one address may have; wait for some to finish", method, host, l.max)
	}
	l.inFlight[host]++
	l.mu.Unlock()
	context.AfterFunc(ctx, func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		if l.inFlight[host]--; l.inFlight[host] <= 0 {
			delete(l.inFlight, host)
		}
	})
	return nil
}
