package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"

	decreev1 "github.com/decreehq/decree/proto/decree/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// session is a connection to a controller, embedded or not.
type session struct {
	client decreev1.ControllerServiceClient
	conn   *grpc.ClientConn
	root   string
	close  func()
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
		if fi, err := os.Stat(filepath.Join(abs, ".decree")); err != nil || !fi.IsDir() {
			return "", fmt.Errorf("%s is not a decree project (no .decree/ directory): run `decreectl init` there first", abs)
		}
		return abs, nil
	}
	for dir := abs; ; dir = filepath.Dir(dir) {
		if fi, err := os.Stat(filepath.Join(dir, ".decree")); err == nil && fi.IsDir() {
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
		conn, err := dial(g.controller)
		if err != nil {
			return nil, err
		}
		return &session{client: decreev1.NewControllerServiceClient(conn), conn: conn, close: func() { conn.Close() }}, nil
	}
	root, err := g.projectRoot()
	if err != nil {
		return nil, err
	}
	sock := filepath.Join(root, ".decree", "decree.sock")
	if live(sock) {
		g.log.Debug("using the controller already serving the project", "socket", sock)
		conn, err := dial("unix://" + sock)
		if err != nil {
			return nil, err
		}
		return &session{client: decreev1.NewControllerServiceClient(conn), conn: conn, root: root, close: func() { conn.Close() }}, nil
	}
	target, stop, err := startEmbedded(ctx, root, g.log)
	if err != nil {
		return nil, err
	}
	conn, err := dial(target)
	if err != nil {
		stop()
		return nil, err
	}
	return &session{
		client: decreev1.NewControllerServiceClient(conn), conn: conn, root: root,
		close: func() { conn.Close(); stop() },
	}, nil
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
	conn, err := grpc.NewClient(target, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, fmt.Errorf("connect to controller %s: %w", target, err)
	}
	return conn, nil
}
