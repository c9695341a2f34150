package rpc

import (
	"context"

	"github.com/decreehq/decree/pkg/routine"
	decreev1 "github.com/decreehq/decree/proto/decree/v1"
)

// SyncRoutines brings config.yml's routine registry in line with the
// routine files (routine.SyncProject).
func (s *ControllerServer) SyncRoutines(ctx context.Context, req *decreev1.SyncRoutinesRequest) (*decreev1.SyncRoutinesResponse, error) {
	rep, err := routine.SyncProject(s.d.Store.Root())
	if err != nil {
		return nil, Status(err)
	}
	return &decreev1.SyncRoutinesResponse{Added: rep.Added, AddedShared: rep.AddedShared, Deprecated: rep.Deprecated, Restored: rep.Restored}, nil
}
