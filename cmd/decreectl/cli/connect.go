package cli

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/decreehq/decree/controller"
	"github.com/decreehq/decree/pkg/auth"
	"github.com/decreehq/decree/pkg/layout"
	decreev1 "github.com/decreehq/decree/proto/decree/v1"
	"github.com/spf13/pflag"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
)

// remoteFlags say how to reach a controller over TCP (--controller
// HOST:PORT): the client token and TLS. A unix socket needs none of them.
type remoteFlags struct {
	tokenFile string
	tlsCA     string
	tlsCert   string
	tlsKey    string
	insecure  bool
}

// addRemoteFlags defines the TCP connection flags on the root command.
func addRemoteFlags(pf *pflag.FlagSet, r *remoteFlags) {
	pf.StringVar(&r.tokenFile, "token-file", "", "file holding the client token for a TCP controller (else env DECREE_TOKEN_FILE, or DECREE_TOKEN with the value); must not be readable by other users")
	pf.StringVar(&r.tlsCA, "tls-ca", "", "CA bundle (PEM) that signed the controller's certificate (default: the system's CAs)")
	pf.StringVar(&r.tlsCert, "tls-cert", "", "client certificate (PEM), when the controller requires mutual TLS")
	pf.StringVar(&r.tlsKey, "tls-key", "", "client certificate's key (PEM)")
	pf.BoolVar(&r.insecure, "insecure", false, "plain TCP without TLS; allowed only to a loopback address")
}

// dialController connects to --controller: a unix socket as is, a TCP
// address with TLS (or --insecure on loopback) and the client token.
func (g *globals) dialController() (*grpc.ClientConn, error) {
	target := g.controller
	if auth.IsUnixTarget(target) {
		if len(target) > 0 && target[0] == '/' {
			target = "unix://" + target
		}
		return dial(target)
	}
	tok, err := auth.ResolveToken(g.remote.tokenFile, os.Getenv)
	if err != nil {
		return nil, err
	}
	opts, err := auth.DialOptions(target, auth.ClientOptions{
		Token: tok, CAFile: g.remote.tlsCA, CertFile: g.remote.tlsCert, KeyFile: g.remote.tlsKey, Insecure: g.remote.insecure,
	})
	if err != nil {
		return nil, err
	}
	conn, err := grpc.NewClient(target, opts...)
	if err != nil {
		return nil, fmt.Errorf("connect to controller %s: %w", target, err)
	}
	return conn, nil
}

// session is a connection to a controller, embedded or not.
type session struct {
	client decreev1.ControllerServiceClient
	conn   *grpc.ClientConn
	root   string
	close  func()
	// embedded is the controller this command started, nil when it talks
	// to one that was already running.
	embedded *controller.Controller
}

// projectRoot finds the project: -C, else the nearest directory at or above
// the working directory that holds .decree/.
func (g *globals) projectRoot() (string, error) {
	start := g.project
	if start == "" {
		wd, err := os.Getwd()
		if err != nil {
			return "", err
		}
		start = wd
	}
	abs, err := filepath.Abs(start)
	if err != nil {
		return "", err
	}
	if g.project != "" {
		if fi, err := os.Stat(filepath.Join(abs, layout.Dir)); err != nil || !fi.IsDir() {
			return "", fmt.Errorf("%s is not a decree project (no .decree/ directory): run `decreectl init` there first", abs)
		}
		return abs, nil
	}
	for dir := abs; ; dir = filepath.Dir(dir) {
		if fi, err := os.Stat(filepath.Join(dir, layout.Dir)); err == nil && fi.IsDir() {
			return dir, nil
		}
		if filepath.Dir(dir) == dir {
			return "", fmt.Errorf("no .decree/ directory in %s or above: run `decreectl init` to start a project, or pass -C DIR", abs)
		}
	}
}

// connect opens a session: to --controller when given, else to the
// controller serving the project's socket, else to an embedded one.
func (g *globals) connect(ctx context.Context) (*session, error) {
	if g.controller != "" {
		conn, err := g.dialController()
		if err != nil {
			return nil, err
		}
		return &session{client: decreev1.NewControllerServiceClient(conn), conn: conn, close: func() { conn.Close() }}, nil
	}
	root, err := g.projectRoot()
	if err != nil {
		return nil, err
	}
	sock := layout.SocketPath(root)
	said := false
	for {
		if live(sock) {
			g.log.Debug("using the controller already serving the project", "socket", sock)
			conn, err := dial("unix://" + sock)
			if err != nil {
				return nil, err
			}
			return &session{client: decreev1.NewControllerServiceClient(conn), conn: conn, root: root, close: func() { conn.Close() }}, nil
		}
		target, c, stop, err := startEmbedded(ctx, root, g.log, g.stderr, g.process)
		if errors.Is(err, controller.ErrLocked) {
			// Another controller holds the project but serves no socket
			// (yet, or any more: it is stopping). Wait for either.
			if !said {
				fmt.Fprintln(g.stderr, "decree: another decree controller holds this project (.decree/controller.lock); waiting for it to serve .decree/decree.sock or to stop")
				said = true
			}
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(200 * time.Millisecond):
			}
			continue
		}
		if err != nil {
			return nil, err
		}
		conn, err := dial(target)
		if err != nil {
			stop()
			return nil, err
		}
		var once sync.Once
		return &session{
			client: decreev1.NewControllerServiceClient(conn), conn: conn, root: root, embedded: c,
			close: func() { once.Do(func() { conn.Close(); stop() }) },
		}, nil
	}
}

// retryConnect reports whether err says the controller is stopping, after
// closing s and waiting a moment: the caller then connects again and goes
// to the next controller serving the project (or starts one).
func (g *globals) retryConnect(ctx context.Context, s *session, err error) bool {
	if status.Code(err) != codes.Unavailable || ctx.Err() != nil {
		return false
	}
	s.close()
	fmt.Fprintln(g.stderr, "decree: the controller serving this project is stopping; trying again")
	select {
	case <-ctx.Done():
	case <-time.After(300 * time.Millisecond):
	}
	return true
}

// live reports whether something accepts connections on the unix socket.
func live(sock string) bool {
	c, err := net.DialTimeout("unix", sock, 500*time.Millisecond)
	if err != nil {
		return false
	}
	c.Close()
	return true
}

func dial(target string) (*grpc.ClientConn, error) {
	conn, err := grpc.NewClient(target, grpc.WithTransportCredentials(insecure.NewCredentials()), auth.MessageSizeDialOption())
	if err != nil {
		return nil, fmt.Errorf("connect to controller %s: %w", target, err)
	}
	return conn, nil
}
