package lease

import (
	"time"

	"github.com/decreehq/decree/pkg/config"
	"github.com/decreehq/decree/pkg/routine"
	decreev1 "github.com/decreehq/decree/proto/decree/v1"
	"google.golang.org/protobuf/types/known/durationpb"
)

// WorkKind is what a piece of work runs.
type WorkKind int

// Kinds of work.
const (
	WorkRoutine  WorkKind = iota + 1 // a message's routine, one attempt
	WorkHook                         // a hook routine
	WorkRouter                       // the router AI command
	WorkPreCheck                     // a routine's readiness check
)

var workKinds = map[WorkKind]decreev1.AssignmentKind{
	WorkRoutine:  decreev1.AssignmentKind_ASSIGNMENT_KIND_ROUTINE,
	WorkHook:     decreev1.AssignmentKind_ASSIGNMENT_KIND_HOOK,
	WorkRouter:   decreev1.AssignmentKind_ASSIGNMENT_KIND_ROUTER,
	WorkPreCheck: decreev1.AssignmentKind_ASSIGNMENT_KIND_PRE_CHECK,
}

// RoutineRef is the routine a piece of work runs, its file's content
// included so that a worker on another machine needs nothing else.
type RoutineRef struct {
	Name    string
	Driver  string
	Path    string // relative to the project root when inside it
	Content []byte
	Format  routine.Format
}

// File is a run-directory file the worker places before running.
type File struct {
	Name    string
	Content []byte
	// Size is the file's size; Fetch is set when Content is left empty
	// because the file is too large to travel in the assignment (the
	// worker reads it with GetRunFile).
	Size  int64
	Fetch bool
}

// Work is what the processing loop hands to a worker: the controller's
// description of one routine attempt, hook or router call. Dispatch turns
// it into the worker protocol's Assignment.
type Work struct {
	Kind        WorkKind
	Attempt     int
	MaxAttempts int
	MessageID   string
	Routine     *RoutineRef
	Params      map[string]string
	Env         map[string]string
	RunFiles    []File
	// MessageDir is the run directory relative to the project root.
	MessageDir     string
	Timeout        time.Duration // 0: none
	NotebookEngine string
	// Tree is the project's tree: settings, for decision-tree routines.
	Tree *config.TreeSettings
	// ManifestDigest names the tree a replica worker must sync to first.
	ManifestDigest string
	// Command and Stdin are the router's command line and input.
	Command string
	Stdin   []byte
}

// assignment converts w to the worker protocol's Assignment.
func (w *Work) assignment() *decreev1.Assignment {
	a := &decreev1.Assignment{
		Kind: workKinds[w.Kind], Attempt: int32(w.Attempt), MaxAttempts: int32(w.MaxAttempts),
		MessageId: w.MessageID, Params: w.Params, Env: w.Env, MessageDir: w.MessageDir,
		NotebookEngine: w.NotebookEngine, ManifestDigest: w.ManifestDigest, Command: w.Command, Stdin: w.Stdin,
	}
	if r := w.Routine; r != nil {
		a.Routine = &decreev1.RoutineRef{Name: r.Name, Driver: r.Driver, Path: r.Path, Content: r.Content, Format: r.Format.Wire()}
	}
	for _, f := range w.RunFiles {
		a.RunFiles = append(a.RunFiles, &decreev1.RunFile{Name: f.Name, Content: f.Content, Size: uint64(f.Size), Fetch: f.Fetch})
	}
	if w.Tree != nil {
		a.Tree = w.Tree.Proto()
	}
	if w.Timeout > 0 {
		a.Timeout = durationpb.New(w.Timeout)
	}
	return a
}
