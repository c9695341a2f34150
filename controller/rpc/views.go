package rpc

import (
	"context"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/decreehq/decree/controller/pipeline"
	"github.com/decreehq/decree/controller/store"
	"github.com/decreehq/decree/pkg/message"
	"github.com/decreehq/decree/pkg/routine"
	decreev1 "github.com/decreehq/decree/proto/decree/v1"
)

// entryInfo describes an inbox entry.
func entryInfo(e store.Entry, state decreev1.MessageState) *decreev1.MessageInfo {
	mi := &decreev1.MessageInfo{Id: e.ID, Name: e.Name(), Chain: e.Chain, Seq: int32(e.Seq), State: state}
	if e.Message != nil {
		fillFromMessage(mi, e.Message)
	}
	return mi
}

func fillFromMessage(mi *decreev1.MessageInfo, m *message.Message) {
	mi.Routine, mi.InputFile = m.Routine(), m.InputFile()
	switch m.Type() {
	case message.TypeSpec:
		mi.Type = decreev1.MessageType_MESSAGE_TYPE_SPEC
	case message.TypeTask:
		mi.Type = decreev1.MessageType_MESSAGE_TYPE_TASK
	}
	for _, f := range m.Fields {
		mi.Fields = append(mi.Fields, &decreev1.Field{Key: f.Key, Value: message.ParamValue(f.Value)})
	}
	mi.Body = m.Body
	if mi.Chain == "" {
		mi.Chain = m.Chain()
	}
	if seq, ok := m.Seq(); ok && mi.Seq == 0 {
		mi.Seq = int32(seq)
	}
	if mi.Id == "" {
		mi.Id = m.ID()
	}
}

// messages lists the inbox (queued or running), done and dead messages.
func (s *ControllerServer) messages() ([]*decreev1.MessageInfo, error) {
	var out []*decreev1.MessageInfo
	running, _, attempt, busy := s.d.Pipeline.Running()
	inbox, err := s.d.Store.ListInbox()
	if err != nil {
		return nil, err
	}
	for _, e := range inbox {
		state := decreev1.MessageState_MESSAGE_STATE_QUEUED
		mi := entryInfo(e, state)
		if busy && e.ID == running {
			mi.State, mi.Attempts = decreev1.MessageState_MESSAGE_STATE_RUNNING, int32(attempt)
		}
		if e.Err != nil {
			mi.DeadReason = e.Err.Error()
		}
		out = append(out, mi)
	}
	done, err := s.d.Store.ListDone()
	if err != nil {
		return nil, err
	}
	for _, f := range done {
		mi := &decreev1.MessageInfo{Name: strings.TrimSuffix(f, ".md"), State: decreev1.MessageState_MESSAGE_STATE_DONE}
		if b, err := os.ReadFile(filepath.Join(s.d.Store.Dir(), store.DoneDir, f)); err == nil {
			if m, err := message.Parse(b); err == nil {
				fillFromMessage(mi, m)
			}
		}
		out = append(out, mi)
	}
	dead, err := s.d.Store.ListDead()
	if err != nil {
		return nil, err
	}
	for _, d := range dead {
		mi := &decreev1.MessageInfo{Id: d.Note.MessageID, Name: strings.TrimSuffix(d.File, ".md"), State: decreev1.MessageState_MESSAGE_STATE_DEAD,
			DeadReason: strings.TrimSpace(d.Note.Reason + ": " + firstLine(d.Note.Detail))}
		if m, err := message.Parse(d.Content); err == nil {
			fillFromMessage(mi, m)
		}
		out = append(out, mi)
	}
	return out, nil
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(strings.TrimSpace(s), "\n")
	return line
}

// runs lists run directories, newest first.
func (s *ControllerServer) runs(chain string, limit int) ([]*decreev1.RunInfo, error) {
	ents, err := os.ReadDir(filepath.Join(s.d.Store.Dir(), store.RunsDir))
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, e := range ents {
		if e.IsDir() && store.CheckID(e.Name()) == nil && (chain == "" || strings.HasPrefix(e.Name(), chain+"-")) {
			ids = append(ids, e.Name())
		}
	}
	sort.Slice(ids, func(i, j int) bool { return idLess(ids[j], ids[i]) })
	var out []*decreev1.RunInfo
	for _, id := range ids {
		run, err := s.d.Store.OpenRun(id)
		if err != nil {
			continue
		}
		out = append(out, runInfo(run))
		if limit > 0 && len(out) == limit {
			break
		}
	}
	return out, nil
}

// idLess orders message ids by chain, then numeric seq.
func idLess(a, b string) bool {
	ac, as, _ := strings.Cut(a, "-")
	bc, bs, _ := strings.Cut(b, "-")
	if ac != bc {
		return ac < bc
	}
	if len(as) != len(bs) {
		return len(as) < len(bs)
	}
	return as < bs
}

// runInfo describes a run, finished or not.
func runInfo(run *store.Run) *decreev1.RunInfo {
	info := run.Record().Proto()
	if run.State().Outcome == "" {
		info.Outcome = decreev1.RunOutcome_RUN_OUTCOME_RUNNING
	}
	if arts, err := run.Artifacts(); err == nil {
		info.Artifacts = arts
	}
	return info
}

// ListRoutines lists routines with descriptions and parameters.
func (s *ControllerServer) ListRoutines(ctx context.Context, req *decreev1.ListRoutinesRequest) (*decreev1.ListRoutinesResponse, error) {
	cfg, err := s.d.Config()
	if err != nil {
		return nil, Status(err)
	}
	entries, err := pipeline.Library(s.d.Store.Root(), cfg).List()
	if err != nil {
		return nil, Status(err)
	}
	resp := &decreev1.ListRoutinesResponse{}
	for _, e := range entries {
		settings := cfg.RoutineSettingsFor(e.Name, e.Shared)
		enabled := routine.Enabled(e.Routine, cfg.Routines, cfg.SharedRoutines)
		if !req.GetAll() && (!enabled || settings.Deprecated) {
			continue
		}
		ri := &decreev1.RoutineInfo{Name: e.Name, Path: e.Path, Enabled: enabled, Deprecated: settings.Deprecated, Shared: e.Shared, Driver: e.Format.Driver(), Format: pipeline.FormatProto(e.Format)}
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
			ri.OtherFormats = append(ri.OtherFormats, pipeline.FormatProto(f))
		}
		resp.Routines = append(resp.Routines, ri)
	}
	return resp, nil
}

// GetStatus summarises the project.
func (s *ControllerServer) GetStatus(ctx context.Context, req *decreev1.GetStatusRequest) (*decreev1.GetStatusResponse, error) {
	all, err := s.messages()
	if err != nil {
		return nil, Status(err)
	}
	resp := &decreev1.GetStatusResponse{ProjectDir: s.d.Store.Root(), Version: s.d.Version, Problems: s.d.Pipeline.Problems()}
	for _, m := range all {
		switch m.GetState() {
		case decreev1.MessageState_MESSAGE_STATE_QUEUED:
			resp.Queued++
		case decreev1.MessageState_MESSAGE_STATE_RUNNING:
			m.Body = nil
			resp.Running = m
		case decreev1.MessageState_MESSAGE_STATE_DONE:
			resp.Done++
		case decreev1.MessageState_MESSAGE_STATE_DEAD:
			resp.Dead++
		}
	}
	if cfg, err := s.d.Config(); err == nil {
		if migs, err := s.d.Pipeline.Migrations(cfg); err == nil {
			for _, m := range migs {
				if m.Processed {
					resp.MigrationsProcessed++
				} else {
					resp.MigrationsPending++
				}
			}
		}
	}
	for _, w := range s.d.Leases.Workers() {
		if w.GetConnected() {
			resp.WorkersConnected++
		}
	}
	return resp, nil
}
