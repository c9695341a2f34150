package rpc

import (
	"context"

	"google.golang.org/protobuf/types/known/timestamppb"

	decreev1 "github.com/decreehq/decree/proto/decree/v1"
)

// CheckRoutines runs the selected pre-checks on workers.
func (s *ControllerServer) CheckRoutines(ctx context.Context, req *decreev1.CheckRoutinesRequest) (*decreev1.CheckRoutinesResponse, error) {
	cfg, err := s.d.Config()
	if err != nil {
		return nil, Status(err)
	}
	targets, err := s.d.Pipeline.PreCheckTargets(cfg, req.GetRoutines(), req.GetAllEnabled(), req.GetPendingMigrations())
	if err != nil {
		return nil, Status(err)
	}
	resp := &decreev1.CheckRoutinesResponse{}
	for _, r := range s.d.Pipeline.PreCheck(ctx, cfg, targets) {
		resp.Results = append(resp.Results, &decreev1.PreCheckResult{
			Routine: r.Routine, Migration: r.Migration, Ready: r.Ready, Reason: r.Reason,
			ExitCode: int32(r.ExitCode), NoPreCheck: r.NoPreCheck,
		})
	}
	if err := ctx.Err(); err != nil {
		return nil, Status(err)
	}
	return resp, nil
}

// GetDeadLetterStats counts the dead letters.
func (s *ControllerServer) GetDeadLetterStats(context.Context, *decreev1.GetDeadLetterStatsRequest) (*decreev1.GetDeadLetterStatsResponse, error) {
	n, oldest, err := s.d.Store.DeadStats()
	if err != nil {
		return nil, Status(err)
	}
	resp := &decreev1.GetDeadLetterStatsResponse{Count: int32(n)}
	if !oldest.IsZero() {
		resp.OldestTime = timestamppb.New(oldest)
	}
	return resp, nil
}
