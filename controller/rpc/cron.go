package rpc

import (
	"context"
	"errors"
	"time"

	decreev1 "github.com/decreehq/decree/proto/decree/v1"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// ListCronEntries lists .decree/cron/ with last and next fires.
func (s *ControllerServer) ListCronEntries(ctx context.Context, req *decreev1.ListCronEntriesRequest) (*decreev1.ListCronEntriesResponse, error) {
	if s.d.Cron == nil {
		return nil, Status(errors.New("this controller has no cron scheduler"))
	}
	ls, err := s.d.Cron.List()
	if err != nil {
		return nil, Status(err)
	}
	resp := &decreev1.ListCronEntriesResponse{}
	for _, l := range ls {
		resp.Entries = append(resp.Entries, &decreev1.CronEntry{
			File: l.File, Schedule: l.Schedule, Routine: l.Routine, TimeZone: l.Zone,
			LastRun: stamp(l.LastRun), NextRun: stamp(l.NextRun), Error: l.Err, CatchUp: l.CatchUp,
		})
	}
	return resp, nil
}

// stamp converts a time, leaving the zero time unset.
func stamp(t time.Time) *timestamppb.Timestamp {
	if t.IsZero() {
		return nil
	}
	return timestamppb.New(t)
}
