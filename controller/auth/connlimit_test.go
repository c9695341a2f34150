package auth

import (
	"errors"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"
)

// TestConnectionLimits: a listener keeps at most perHost connections from
// one address; further ones are closed at once, and a closed connection
// frees its slot.
func TestConnectionLimits(t *testing.T) {
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := newLimitListener(raw, 2, 100, slog.New(slog.DiscardHandler))
	defer l.Close()
	accepted := make(chan net.Conn, 10)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				close(accepted)
				return
			}
			accepted <- c
		}
	}()
	dial := func() net.Conn {
		c, err := net.Dial("tcp", raw.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	// closedByServer reports whether the server hung up on c.
	closedByServer := func(c net.Conn) bool {
		c.SetReadDeadline(time.Now().Add(2 * time.Second))
		_, err := c.Read(make([]byte, 1))
		return errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) || isReset(err)
	}
	dial()
	dial()
	a1, a2 := <-accepted, <-accepted
	third := dial()
	if !closedByServer(third) {
		t.Fatal("a third connection from the same address was kept open; the limit is 2")
	}
	a1.Close()
	fourth := dial()
	select {
	case c := <-accepted:
		c.Close()
	case <-time.After(5 * time.Second):
		t.Fatal("after one connection closed, a new one was not accepted")
	}
	_ = fourth
	a2.Close()
}

func isReset(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && !op.Timeout()
}
