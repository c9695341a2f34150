package auth

import (
	"log/slog"
	"net"
	"sync"
)

// Connection limits of a TCP listener. With MaxConcurrentStreams per
// connection, MaxHeaderListBytes per stream and unauthenticated streams
// refused on their headers, they bound what one remote address can make
// the controller hold before it has shown a token: at most
// MaxConnsPerHost connections, each with its transport buffers (about
// 64 KiB) and the headers of its open streams.
const (
	// MaxConnsPerHost is the number of TCP connections one remote IP
	// address may hold open at once. A worker or decreectl uses one; a
	// host running many workers behind one NAT address needs one each.
	MaxConnsPerHost = 64
	// MaxConns is the number of TCP connections a listener holds open at
	// once, from all addresses together.
	MaxConns = 1024
)

// limitListener closes connections beyond the per-host and total limits
// as soon as they are accepted.
type limitListener struct {
	net.Listener
	log     *slog.Logger
	perHost int
	total   int

	mu     sync.Mutex
	byHost map[string]int
	open   int
}

func newLimitListener(l net.Listener, perHost, total int, log *slog.Logger) *limitListener {
	return &limitListener{Listener: l, log: log, perHost: perHost, total: total, byHost: map[string]int{}}
}

// Accept returns the next connection within the limits; connections over
// a limit are closed (the peer sees the connection drop) and logged.
func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		host := remoteHost(c)
		l.mu.Lock()
		over := l.byHost[host] >= l.perHost || l.open >= l.total
		if !over {
			l.byHost[host]++
			l.open++
		}
		l.mu.Unlock()
		if over {
			l.log.Warn("refused a TCP connection over the connection limit", "peer", c.RemoteAddr(), "per_host", l.perHost, "total", l.total)
			c.Close()
			continue
		}
		return &limitConn{Conn: c, release: func() { l.release(host) }}, nil
	}
}

func (l *limitListener) release(host string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.open--
	if l.byHost[host]--; l.byHost[host] <= 0 {
		delete(l.byHost, host)
	}
}

func remoteHost(c net.Conn) string {
	if ta, ok := c.RemoteAddr().(*net.TCPAddr); ok {
		return ta.IP.String()
	}
	return c.RemoteAddr().String()
}

// limitConn gives its slot back once, when closed.
type limitConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}
