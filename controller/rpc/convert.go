package rpc

import (
	"time"

	"github.com/decreehq/decree/controller/events"
	"github.com/decreehq/decree/controller/store"
	"github.com/decreehq/decree/pkg/layout"
	"github.com/decreehq/decree/pkg/message"
	decreev1 "github.com/decreehq/decree/proto/decree/v1"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// eventKinds maps the controller's event kinds to the API's.
var eventKinds = map[events.Kind]decreev1.EventKind{
	events.MessageQueued:   decreev1.EventKind_EVENT_KIND_MESSAGE_QUEUED,
	events.MessageStarted:  decreev1.EventKind_EVENT_KIND_MESSAGE_STARTED,
	events.AttemptStarted:  decreev1.EventKind_EVENT_KIND_ATTEMPT_STARTED,
	events.AttemptFinished: decreev1.EventKind_EVENT_KIND_ATTEMPT_FINISHED,
	events.MessageDone:     decreev1.EventKind_EVENT_KIND_MESSAGE_DONE,
	events.MessageDead:     decreev1.EventKind_EVENT_KIND_MESSAGE_DEAD,
	events.Reverted:        decreev1.EventKind_EVENT_KIND_REVERTED,
	events.ChainFinished:   decreev1.EventKind_EVENT_KIND_CHAIN_FINISHED,
	events.ProcessFinished: decreev1.EventKind_EVENT_KIND_PROCESS_FINISHED,
	events.Warning:         decreev1.EventKind_EVENT_KIND_WARNING,
	events.HookFinished:    decreev1.EventKind_EVENT_KIND_HOOK_FINISHED,
	events.UsageLimitWait:  decreev1.EventKind_EVENT_KIND_USAGE_LIMIT_WAIT,
	events.Waiting:         decreev1.EventKind_EVENT_KIND_WAITING,
	events.Replied:         decreev1.EventKind_EVENT_KIND_REPLIED,
	events.TimedOut:        decreev1.EventKind_EVENT_KIND_TIMED_OUT,
	events.LaneOpened:      decreev1.EventKind_EVENT_KIND_LANE_OPENED,
	events.ChainMerged:     decreev1.EventKind_EVENT_KIND_CHAIN_MERGED,
	events.MergeConflict:   decreev1.EventKind_EVENT_KIND_MERGE_CONFLICT,
}

// eventProto converts a controller event to the API's Event.
func eventProto(e *events.Event) *decreev1.Event {
	out := &decreev1.Event{
		Sequence: e.Sequence, Kind: eventKinds[e.Kind], MessageId: e.MessageID, Chain: e.Chain,
		Attempt: int32(e.Attempt), ExitCode: int32(e.ExitCode), Text: e.Text, Routine: e.Routine,
		WorkerId: e.WorkerID, JobId: e.JobID, WaitId: e.WaitID, Lane: e.Lane,
	}
	if !e.Time.IsZero() {
		out.Time = timestamppb.New(e.Time)
	}
	if !e.Until.IsZero() {
		out.Until = timestamppb.New(e.Until)
	}
	return out
}

// messageStates maps the store's message states to the API's.
var messageStates = map[store.MessageState]decreev1.MessageState{
	store.StateQueued:      decreev1.MessageState_MESSAGE_STATE_QUEUED,
	store.StateDone:        decreev1.MessageState_MESSAGE_STATE_DONE,
	store.StateDead:        decreev1.MessageState_MESSAGE_STATE_DEAD,
	store.StateInterrupted: decreev1.MessageState_MESSAGE_STATE_INTERRUPTED,
}

// messageInfo converts a listed message (never its body).
func messageInfo(v store.MessageView) *decreev1.MessageInfo {
	mi := &decreev1.MessageInfo{Id: v.ID, Name: v.Name, Chain: v.Chain, Seq: int32(v.Seq), State: messageStates[v.State], DeadReason: v.Problem, Attempts: int32(v.Attempt)}
	if m := v.Message; m != nil {
		if of := m.GetString(message.OutboxFileField); layout.IsMessageFile(of) {
			mi.Name = layout.MessageStem(of) // a follow-up keeps its outbox name
		}
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
	}
	return mi
}

// entryInfo converts an inbox entry the loop just queued or requeued.
func entryInfo(e store.Entry) *decreev1.MessageInfo {
	return messageInfo(store.MessageView{ID: e.ID, Name: e.Name(), Chain: e.Chain, Seq: e.Seq, State: store.StateQueued, Message: e.Message})
}

// runInfo converts a run, finished or not, with its artifacts.
func runInfo(run *store.Run) *decreev1.RunInfo {
	info := runRecordProto(run.Record())
	if run.State().Outcome == "" {
		info.Outcome = decreev1.RunOutcome_RUN_OUTCOME_RUNNING
	}
	if arts, err := run.Artifacts(); err == nil {
		info.Artifacts = arts
	}
	return info
}

// runOutcomes maps run.json outcomes to the API's.
var runOutcomes = map[string]decreev1.RunOutcome{
	store.OutcomeSucceeded:    decreev1.RunOutcome_RUN_OUTCOME_SUCCEEDED,
	store.OutcomeDeadLettered: decreev1.RunOutcome_RUN_OUTCOME_DEAD_LETTERED,
	store.OutcomeCancelled:    decreev1.RunOutcome_RUN_OUTCOME_CANCELLED,
	"":                        decreev1.RunOutcome_RUN_OUTCOME_RUNNING,
}

// runRecordProto converts a run.json record to the API's RunInfo.
func runRecordProto(rec store.RunRecord) *decreev1.RunInfo {
	ts := func(s string) *timestamppb.Timestamp {
		t, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			return nil
		}
		return timestamppb.New(t)
	}
	out := &decreev1.RunInfo{
		MessageId: rec.MessageID, Routine: rec.Routine, Trigger: rec.Trigger, Migration: rec.Migration,
		Attempts: int32(rec.Attempts), MaxAttempts: int32(rec.MaxAttempts), ExitCode: int32(rec.ExitCode),
		StartTime: ts(rec.Start), EndTime: ts(rec.End), Duration: durationpb.New(time.Duration(rec.DurationMS) * time.Millisecond),
		Artifacts: rec.Artifacts, TimeZone: rec.TimeZone, Outcome: runOutcomes[rec.Outcome],
	}
	for _, a := range rec.AttemptDetails {
		out.AttemptDetails = append(out.AttemptDetails, &decreev1.AttemptInfo{
			Attempt: int32(a.Attempt), ExitCode: int32(a.ExitCode), Error: a.Error,
			StartTime: ts(a.Start), EndTime: ts(a.End), WorkerId: a.WorkerID, LogName: a.LogName, Usage: usageProto(a.Usage),
		})
	}
	out.Usage, out.MaxCostUsd = usageProto(rec.Usage), rec.MaxCostUSD
	return out
}
