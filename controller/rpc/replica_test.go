package rpc

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net"
	"os"
	"path/filepath"
	"testing"

	"github.com/decreehq/decree/controller/lease"
	"github.com/decreehq/decree/controller/replica"
	"github.com/decreehq/decree/pkg/checkpoint"
	decreev1 "github.com/decreehq/decree/proto/decree/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
)

type activeLeases map[string]lease.AssignmentView

func (a activeLeases) Active(token string) (lease.AssignmentView, error) {
	if v, ok := a[token]; ok {
		return v, nil
	}
	return lease.AssignmentView{}, lease.ErrUnknownLease
}

func hexOf(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// replicaClient serves the replica RPCs of a small published tree (or no
// replica service when rep is false) and returns a client.
func replicaClient(t *testing.T, withReplica bool) decreev1.WorkerServiceClient {
	t.Helper()
	dir := t.TempDir()
	root := filepath.Join(dir, "project")
	os.MkdirAll(root, 0o755)
	os.WriteFile(filepath.Join(root, "a.txt"), []byte("alpha\n"), 0o644)
	cp, err := checkpoint.New(checkpoint.Options{ObjectsDir: filepath.Join(dir, "objects"), NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	m, err := cp.Snapshot(context.Background(), root)
	if err != nil {
		t.Fatal(err)
	}
	leases := activeLeases{}
	svc, err := replica.New(replica.Options{Root: root, Objects: cp.Store(), Leases: leases, MaxBlobSize: 1000})
	if err != nil {
		t.Fatal(err)
	}
	digest, release, err := svc.Publish(m)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(release)
	leases["tok"] = lease.AssignmentView{MessageID: "m-1", Attempt: 1, ManifestDigest: digest}
	sock := filepath.Join(dir, "s.sock")
	lis, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	ws := NewWorkerServer(nil)
	if withReplica {
		ws = ws.WithReplica(svc)
	}
	decreev1.RegisterWorkerServiceServer(srv, ws)
	go srv.Serve(lis)
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(); srv.Stop() })
	return decreev1.NewWorkerServiceClient(conn)
}

func getBlobs(c decreev1.WorkerServiceClient, token string, sums ...string) error {
	stream, err := c.GetBlobs(context.Background(), &decreev1.GetBlobsRequest{LeaseToken: token, Sha256: sums})
	if err != nil {
		return err
	}
	for {
		if _, err := stream.Recv(); err != nil {
			if err == io.EOF {
				return nil
			}
			return err
		}
	}
}

func putBlob(c decreev1.WorkerServiceClient, token, sum string, data []byte) error {
	stream, err := c.PutBlobs(context.Background())
	if err != nil {
		return err
	}
	if err := stream.Send(&decreev1.PutBlobsRequest{LeaseToken: token, Sha256: sum, Data: data, Last: true}); err != nil && err != io.EOF {
		return err
	}
	_, err = stream.CloseAndRecv()
	return err
}

func TestReplicaRPCStatusCodes(t *testing.T) {
	c := replicaClient(t, true)
	big := make([]byte, 2000)
	tests := []struct {
		name string
		call func() error
		want codes.Code
	}{
		{"manifest", func() error {
			_, err := c.GetWorkspaceManifest(context.Background(), &decreev1.GetWorkspaceManifestRequest{LeaseToken: "tok"})
			return err
		}, codes.OK},
		{"manifest of unknown lease", func() error {
			_, err := c.GetWorkspaceManifest(context.Background(), &decreev1.GetWorkspaceManifestRequest{LeaseToken: "nope"})
			return err
		}, codes.NotFound},
		{"blob in the manifest", func() error { return getBlobs(c, "tok", hexOf([]byte("alpha\n"))) }, codes.OK},
		{"blob outside the manifest", func() error { return getBlobs(c, "tok", hexOf([]byte("secret"))) }, codes.PermissionDenied},
		{"not a hash", func() error { return getBlobs(c, "tok", "../../etc/passwd") }, codes.InvalidArgument},
		{"upload", func() error { return putBlob(c, "tok", hexOf([]byte("new")), []byte("new")) }, codes.OK},
		{"upload with a wrong hash", func() error { return putBlob(c, "tok", hexOf([]byte("other")), []byte("new")) }, codes.InvalidArgument},
		{"upload over the limit", func() error { return putBlob(c, "tok", hexOf(big), big) }, codes.ResourceExhausted},
		{"upload under an unknown lease", func() error { return putBlob(c, "nope", hexOf([]byte("new")), []byte("new")) }, codes.NotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := status.Code(tt.call()); got != tt.want {
				t.Errorf("code = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestReplicaRPCsWithoutReplicaService(t *testing.T) {
	c := replicaClient(t, false)
	_, err := c.GetWorkspaceManifest(context.Background(), &decreev1.GetWorkspaceManifestRequest{LeaseToken: "tok"})
	if status.Code(err) != codes.Unimplemented {
		t.Errorf("code = %v, want Unimplemented", status.Code(err))
	}
}
