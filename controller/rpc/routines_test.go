package rpc

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/decreehq/decree/controller/store"
	"github.com/decreehq/decree/pkg/config"
	decreev1 "github.com/decreehq/decree/proto/decree/v1"
	"google.golang.org/grpc"
)

// newControllerClient serves the ControllerService of a project with the
// given config.yml and routine files on a unix socket and dials it.
func newControllerClient(t *testing.T, cfg string, routines ...string) (decreev1.ControllerServiceClient, string) {
	t.Helper()
	dir := t.TempDir()
	root := filepath.Join(dir, "project")
	st, err := store.Open(root, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	cfgPath := filepath.Join(st.Dir(), "config.yml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(st.Dir(), "routines"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, r := range routines {
		if err := os.WriteFile(filepath.Join(st.Dir(), "routines", r), []byte("#!/bin/bash\n# "+r+"\necho\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	load := func() (*config.Config, error) {
		c, _, err := config.Load(cfgPath)
		return c, err
	}
	conn := serveUnix(t, func(srv *grpc.Server) {
		decreev1.RegisterControllerServiceServer(srv, NewControllerServer(ControllerDeps{Store: st, Config: load}))
	})
	return decreev1.NewControllerServiceClient(conn), cfgPath
}

func TestSyncRoutines(t *testing.T) {
	c, cfgPath := newControllerClient(t, "# keep\nroutines:\n  develop: {}\n  gone: {}\n", "develop.sh", "lint.sh")
	ctx := context.Background()
	resp, err := c.SyncRoutines(ctx, &decreev1.SyncRoutinesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(resp.GetAdded(), []string{"lint"}) || !reflect.DeepEqual(resp.GetDeprecated(), []string{"gone"}) ||
		len(resp.GetAddedShared())+len(resp.GetRestored()) != 0 {
		t.Errorf("SyncRoutines = %v", resp)
	}
	data, err := os.ReadFile(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(data), "# keep\n") || !strings.Contains(string(data), "lint:") || !strings.Contains(string(data), "deprecated: true") {
		t.Errorf("config.yml after sync:\n%s", data)
	}
	list, err := c.ListRoutines(ctx, &decreev1.ListRoutinesRequest{All: true})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, r := range list.GetRoutines() {
		names = append(names, r.GetName())
	}
	if !reflect.DeepEqual(names, []string{"develop", "lint"}) {
		t.Errorf("routines after sync = %v", names)
	}
	resp, err = c.SyncRoutines(ctx, &decreev1.SyncRoutinesRequest{})
	if err != nil || len(resp.GetAdded())+len(resp.GetAddedShared())+len(resp.GetDeprecated())+len(resp.GetRestored()) != 0 {
		t.Errorf("second SyncRoutines = %v, %v; want nothing to do", resp, err)
	}
}

func TestListRoutinesDefault(t *testing.T) {
	tests := []struct {
		cfg, want string
	}{
		{"", "develop"},
		{"default_routine: review\n", "review"},
	}
	for _, tt := range tests {
		c, _ := newControllerClient(t, tt.cfg, "develop.sh", "review.sh")
		resp, err := c.ListRoutines(context.Background(), &decreev1.ListRoutinesRequest{})
		if err != nil {
			t.Fatal(err)
		}
		if resp.GetDefaultRoutine() != tt.want {
			t.Errorf("config %q: default routine %q, want %q", tt.cfg, resp.GetDefaultRoutine(), tt.want)
		}
	}
}
