package worker

import (
	"context"
	"fmt"
	"io"
	"log/slog"

	"google.golang.org/protobuf/proto"

	"github.com/decreehq/decree/pkg/wiremanifest"
	decreev1 "github.com/decreehq/decree/proto/decree/v1"
	"github.com/decreehq/decree/worker/replica"
)

// replicaOutcome is what a replica run sends back with its result.
type replicaOutcome struct {
	manifest []*decreev1.FileEntry
	files    []*decreev1.ReturnedFile
}

// fill puts the outcome into the completion report.
func (o *replicaOutcome) fill(req *decreev1.CompleteAssignmentRequest) {
	if o == nil {
		return
	}
	req.WorkspaceManifest = o.manifest
	req.Files = o.files
	req.WorkspaceReturned = true
}

// needsSync reports whether a runs in a replica brought to the
// controller's manifest first: routines and hooks on a worker that does
// not share the controller's tree, when the controller names a manifest.
// Router calls run in the replica as it is and return nothing.
func (w *worker) needsSync(a *decreev1.Assignment) bool {
	if w.inPlace.Load() || a.GetManifestDigest() == "" {
		return false
	}
	k := a.GetKind()
	return k == decreev1.AssignmentKind_ASSIGNMENT_KIND_ROUTINE || k == decreev1.AssignmentKind_ASSIGNMENT_KIND_HOOK ||
		k == decreev1.AssignmentKind_ASSIGNMENT_KIND_PRE_CHECK
}

// openReplica opens the workspace's replica state once.
func (w *worker) openReplica() (*replica.Replica, error) {
	w.repMu.Lock()
	defer w.repMu.Unlock()
	if w.rep != nil {
		return w.rep, nil
	}
	r, err := replica.Open(w.workspace, replica.Options{Logger: w.log})
	if err != nil {
		return nil, err
	}
	w.rep = r
	return r, nil
}

// executeReplica syncs the replica, runs a in it, and gathers what goes
// back: the replica's manifest after the run (its new contents uploaded)
// and the returned files. The work after the run uses drain, so a stopped
// routine's changes still reach the controller. When the sync fails the
// routine does not run and nothing is returned (the controller's tree
// stays as it is).
func (w *worker) executeReplica(ctx, drain context.Context, a *decreev1.Assignment, out io.Writer, log *slog.Logger) (*Result, *replicaOutcome, error) {
	rep, err := w.openReplica()
	if err != nil {
		return nil, nil, err
	}
	token := a.GetLeaseToken()
	synced, err := rep.Sync(ctx, w.client, token, a.GetManifestDigest())
	if err != nil {
		return nil, nil, fmt.Errorf("bring the replica workspace %s up to date: %w", w.workspace, err)
	}
	log.Info("replica synced", "files", len(synced.Manifest.Files), "fetched_blobs", synced.FetchedBlobs,
		"fetched_bytes", synced.FetchedBytes, "copied_local", synced.CopiedLocal, "written", synced.Written, "deleted", synced.Deleted)
	a = proto.Clone(a).(*decreev1.Assignment)
	if err := rep.PrepareRun(a.GetMessageDir()); err != nil {
		return nil, nil, err
	}
	if a.GetRoutine() != nil {
		p, err := rep.WriteRoutine(a.GetRoutine())
		if err != nil {
			return nil, nil, err
		}
		a.Routine.Path = p
	}
	res, execErr := w.execute(ctx, a, out)

	after, err := rep.Scan(drain)
	if err != nil {
		return res, nil, joinExec(execErr, fmt.Errorf("scan the replica after the run: %w", err))
	}
	up, err := rep.Upload(drain, w.client, token, synced.Manifest, after)
	if err != nil {
		return res, nil, joinExec(execErr, err)
	}
	skip := map[string]bool{}
	for _, f := range a.GetRunFiles() {
		skip[f.GetName()] = true
	}
	files, notes := rep.Collect(a.GetMessageDir(), skip)
	for _, n := range notes {
		log.Warn("returned file left out", "note", n)
	}
	log.Info("replica result ready", "files", len(after.Files), "uploaded_blobs", up.Blobs, "uploaded_bytes", up.Bytes, "returned_files", len(files))
	return res, &replicaOutcome{manifest: wiremanifest.ToProto(after), files: files}, execErr
}

func joinExec(execErr, err error) error {
	if execErr != nil {
		return fmt.Errorf("%w; also: %w", execErr, err)
	}
	return fmt.Errorf("the routine ran, but its changes could not be sent back: %w", err)
}
