package rpc

import (
	"net"
	"path/filepath"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	decreev1 "github.com/decreehq/decree/proto/decree/v1"
)

// serveUnix starts a gRPC server on a unix socket in a new temporary
// directory, registers on it what register does, and returns a client
// connection to it; both end with the test.
func serveUnix(t *testing.T, register func(*grpc.Server)) *grpc.ClientConn {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "c.sock")
	lis, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	register(srv)
	go srv.Serve(lis)
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		conn.Close()
		srv.Stop()
	})
	return conn
}

// controllerClient serves a ControllerServer with deps (serveUnix).
func controllerClient(t *testing.T, deps ControllerDeps) decreev1.ControllerServiceClient {
	t.Helper()
	return decreev1.NewControllerServiceClient(serveUnix(t, func(s *grpc.Server) {
		decreev1.RegisterControllerServiceServer(s, NewControllerServer(deps))
	}))
}
