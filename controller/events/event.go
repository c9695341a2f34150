package events

import "time"

// Kind says what an event reports. The values are stable names: they are
// written to events.jsonl and replayed after a restart.
type Kind string

// Event kinds.
const (
	MessageQueued   Kind = "message_queued"
	MessageStarted  Kind = "message_started"
	AttemptStarted  Kind = "attempt_started"
	AttemptFinished Kind = "attempt_finished"
	MessageDone     Kind = "message_done"
	MessageDead     Kind = "message_dead"
	Reverted        Kind = "reverted"
	ChainFinished   Kind = "chain_finished"
	ProcessFinished Kind = "process_finished"
	Warning         Kind = "warning"
	HookFinished    Kind = "hook_finished"
	UsageLimitWait  Kind = "usage_limit_wait"
	// A message waits for a person (a question or a review), a reply was
	// recorded, or the wait's deadline passed first.
	Waiting  Kind = "waiting"
	Replied  Kind = "replied"
	TimedOut Kind = "timed_out"
	// A parallel chain got a lane (its own tree on one worker), its change
	// was merged into the project tree, or the merge found a conflict
	// (Text names the files; the chain is requeued or dead-lettered).
	LaneOpened    Kind = "lane_opened"
	ChainMerged   Kind = "chain_merged"
	MergeConflict Kind = "merge_conflict"
)

// Event is one thing that happened in the controller. The event log
// stamps Sequence and Time; the rest is set by whoever reports it.
type Event struct {
	Sequence  uint64    `json:"sequence"`
	Time      time.Time `json:"time"`
	Kind      Kind      `json:"kind"`
	MessageID string    `json:"message_id,omitempty"`
	Chain     string    `json:"chain,omitempty"`
	Attempt   int       `json:"attempt,omitempty"`
	ExitCode  int       `json:"exit_code,omitempty"`
	Text      string    `json:"text,omitempty"`
	Routine   string    `json:"routine,omitempty"`
	WorkerID  string    `json:"worker_id,omitempty"`
	JobID     string    `json:"job_id,omitempty"`
	// Until is when a usage-limit wait ends (UsageLimitWait).
	Until time.Time `json:"until,omitzero"`
	// WaitID names the wait of Waiting, Replied and TimedOut (Until is
	// then its deadline, if it has one).
	WaitID string `json:"wait_id,omitempty"`
	// Lane is the parallel lane concerned (its chain's id), on events of
	// messages that run in one and on lane and merge events.
	Lane string `json:"lane,omitempty"`
}
