package rpc

import (
	"context"
	"path/filepath"
	"strings"

	"github.com/decreehq/decree/controller/store"
	"github.com/decreehq/decree/pkg/routine"
	decreev1 "github.com/decreehq/decree/proto/decree/v1"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// messages lists every message, marking the one the loop is running.
func (s *ControllerServer) messages() ([]*decreev1.MessageInfo, error) {
	views, err := s.d.Store.Messages()
	if err != nil {
		return nil, err
	}
	out := make([]*decreev1.MessageInfo, 0, len(views))
	for _, v := range views {
		out = append(out, s.withWait(s.messageView(v)))
	}
	return out, nil
}

// messageView converts a listed message, marking it running when the loop
// is processing it.
func (s *ControllerServer) messageView(v store.MessageView) *decreev1.MessageInfo {
	mi := messageInfo(v)
	if running, routineName, attempt, busy := s.d.Pipeline.Running(); busy && (v.State == store.StateQueued || v.State == store.StateInterrupted) && v.ID == running {
		mi.State, mi.Attempts = decreev1.MessageState_MESSAGE_STATE_RUNNING, int32(attempt)
		if mi.Routine == "" {
			mi.Routine = routineName // chosen by the router or default_routine
		}
	}
	return mi
}

// ListRoutines lists routines with descriptions and parameters.
func (s *ControllerServer) ListRoutines(ctx context.Context, req *decreev1.ListRoutinesRequest) (*decreev1.ListRoutinesResponse, error) {
	cfg, err := s.d.Config()
	if err != nil {
		return nil, Status(err)
	}
	entries, err := routine.ProjectLibrary(s.d.Store.Root(), cfg).List()
	if err != nil {
		return nil, Status(err)
	}
	resp := &decreev1.ListRoutinesResponse{DefaultRoutine: cfg.DefaultRoutine}
	for _, e := range entries {
		settings := cfg.RoutineSettingsFor(e.Name, e.Shared)
		enabled := routine.Enabled(e.Routine, cfg.Routines, cfg.SharedRoutines)
		if !req.GetAll() && (!enabled || settings.Deprecated) {
			continue
		}
		ri := &decreev1.RoutineInfo{Name: e.Name, Path: e.Path, Enabled: enabled, Deprecated: settings.Deprecated, Shared: e.Shared, Driver: e.Format.Driver(), Format: e.Format.Wire()}
		if rel, err := filepath.Rel(s.d.Store.Root(), e.Path); err == nil && !strings.HasPrefix(rel, "..") {
			ri.Path = filepath.ToSlash(rel)
		}
		if err := e.Check(); err != nil {
			ri.Problem = err.Error()
		}
		ri.Description, _ = e.Description()
		params, _ := e.Params()
		for _, p := range params {
			ri.Parameters = append(ri.Parameters, &decreev1.Parameter{Name: p.Name, DefaultValue: p.Default, Standard: routine.IsStandardParam(p.Name), HasDefault: p.HasDefault})
		}
		for _, f := range e.Also {
			ri.OtherFormats = append(ri.OtherFormats, f.Wire())
		}
		resp.Routines = append(resp.Routines, ri)
	}
	return resp, nil
}

// GetStatus summarises the project.
func (s *ControllerServer) GetStatus(ctx context.Context, req *decreev1.GetStatusRequest) (*decreev1.GetStatusResponse, error) {
	sum, err := s.d.Store.Summarize()
	if err != nil {
		return nil, Status(err)
	}
	resp := &decreev1.GetStatusResponse{ProjectDir: s.d.Store.Root(), Version: s.d.Version, Queued: int32(sum.Queued), Done: int32(sum.Done), Dead: int32(sum.Dead), Daemon: s.d.Daemon, Problems: s.d.Pipeline.Problems()}
	running, routineName, attempt, busy := s.d.Pipeline.Running()
	if busy {
		if v, ok := s.d.Store.QueuedView(running); ok {
			resp.Running = messageInfo(v)
			resp.Running.State, resp.Running.Attempts = decreev1.MessageState_MESSAGE_STATE_RUNNING, int32(attempt)
			if resp.Running.Routine == "" {
				resp.Running.Routine = routineName // chosen by the router or default_routine
			}
			resp.Queued--
		}
	}
	all := s.d.Pipeline.RunningIDs()
	for id := range all {
		if id == running {
			continue
		}
		if v, ok := s.d.Store.QueuedView(id); ok && v.ID == id {
			resp.Queued--
		}
	}
	for _, v := range sum.Interrupted {
		if all[v.ID] {
			continue
		}
		resp.Interrupted = append(resp.Interrupted, messageInfo(v))
	}
	if cfg, err := s.d.Config(); err == nil {
		if done, pending, err := s.d.Pipeline.MigrationCounts(cfg); err == nil {
			resp.MigrationsProcessed, resp.MigrationsPending = int32(done), int32(pending)
		}
	}
	for _, w := range s.d.Leases.Workers() {
		if w.GetConnected() {
			resp.WorkersConnected++
		}
	}
	if u, ok := s.d.Pipeline.RunningUsage(); ok && resp.Running != nil {
		resp.RunningUsage = usageProto(&u)
	}
	resp.Waits = int32(len(s.d.Pipeline.Waits()))
	lanes, merges := s.d.Pipeline.Lanes()
	resp.Merges = merges
	for _, c := range s.d.Pipeline.MergeConflicts(5) {
		resp.MergeConflicts = append(resp.MergeConflicts, &decreev1.MergeConflict{Chain: c.Chain, Conflicts: c.Conflicts, RequeuedAs: c.RequeuedAs, Time: timestamppb.New(c.Time)})
	}
	for _, l := range lanes {
		st := decreev1.LaneState_LANE_STATE_RUNNING
		if l.Merging {
			st = decreev1.LaneState_LANE_STATE_MERGING
		}
		resp.Lanes = append(resp.Lanes, &decreev1.Lane{Chain: l.Chain, WorkerId: l.Worker, MessageId: l.MessageID,
			Attempt: int32(l.Attempt), State: st, MergePosition: int32(l.MergePosition), RetryOf: l.RetryOf, Opened: timestamppb.New(l.Opened)})
	}
	if id, until, notice, ok := s.d.Pipeline.UsageLimitWait(); ok {
		resp.UsageLimitWait = &decreev1.UsageLimitWait{MessageId: id, Until: timestamppb.New(until), Notice: notice}
	}
	return resp, nil
}
