package pipeline

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"strings"

	"github.com/decreehq/decree/controller/events"
	"github.com/decreehq/decree/controller/msgstate"
	"github.com/decreehq/decree/controller/store"
	"github.com/decreehq/decree/pkg/checkpoint"
	"github.com/decreehq/decree/pkg/fsutil"
	"github.com/decreehq/decree/pkg/layout"
	"github.com/decreehq/decree/pkg/message"
)

// ErrInvalid is returned (wrapped) for bad client input.
var ErrInvalid = errors.New("invalid argument")

// Submission is a new root message from a client.
type Submission struct {
	Name string
	Body []byte
	// BodyFrom, when set, is read for the body instead of Body (a body
	// stored in a file as it arrived), streamed into the inbox file.
	BodyFrom io.ReadSeeker
	Fields   []message.Field
	// Chain, when set, is the chain id to use (one the caller reserved
	// with Store.ReserveChain); a fresh one otherwise.
	Chain string
}

// Submit queues a root message and returns its entry and the event
// sequence to watch from. Without a name, the name comes from the spec file
// (input_file), else the router, else "run-<chain>".
func (p *Pipeline) Submit(ctx context.Context, sub Submission) (store.Entry, uint64, error) {
	if p.isStopping() {
		return store.Entry{}, 0, fmt.Errorf("%w: submit the message again once it stopped (decreectl does so by itself)", ErrStopping)
	}
	cfg, err := p.d.Config()
	if err != nil {
		return store.Entry{}, 0, err
	}
	m := &message.Message{HasFrontmatter: len(sub.Fields) > 0}
	for _, f := range sub.Fields {
		if err := message.CheckFieldKey(f.Key); err != nil {
			return store.Entry{}, 0, fmt.Errorf("%w: %v", ErrInvalid, err)
		}
		if _, dup := m.Get(f.Key); dup {
			return store.Entry{}, 0, fmt.Errorf("%w: field %s given twice", ErrInvalid, f.Key)
		}
		m.Set(f.Key, f.Value)
	}
	if sub.Chain != "" {
		m.Set("chain", sub.Chain)
		m.Set("seq", 0)
	}
	if in := m.InputFile(); in != "" {
		full, err := fsutil.ConfinedJoin(p.d.Store.Root(), in)
		if err != nil {
			return store.Entry{}, 0, fmt.Errorf("%w: input_file %q: %v", ErrInvalid, in, err)
		}
		if _, err := os.Stat(full); err != nil {
			return store.Entry{}, 0, fmt.Errorf("%w: input_file %q does not exist in the project", ErrInvalid, in)
		}
		if strings.HasSuffix(in, ".spec.md") {
			m.Set("type", message.TypeSpec)
		}
	}
	if m.Type() == "" {
		m.Set("type", message.TypeTask)
	}
	name := sub.Name
	if name != "" {
		if err := message.CheckName(name); err != nil {
			return store.Entry{}, 0, fmt.Errorf("%w: %v", ErrInvalid, err)
		}
		if k := message.KebabName(name); k != "" {
			name = k
		} else {
			return store.Entry{}, 0, fmt.Errorf("%w: message name %q has no letters or digits", ErrInvalid, sub.Name)
		}
	} else if in := m.InputFile(); in != "" {
		name = message.KebabName(strings.TrimSuffix(strings.TrimSuffix(path.Base(in), ".md"), ".spec"))
	} else {
		body, err := submittedBody(sub)
		if err != nil {
			return store.Entry{}, 0, fmt.Errorf("read the submitted body: %w", err)
		}
		name = p.DeriveName(ctx, cfg, body)
	}
	seq := p.d.Events.Last() + 1
	from := sub.BodyFrom
	if from == nil {
		from = bytes.NewReader(sub.Body)
	}
	e, err := p.d.Store.CreateMessageFrom(name, m, from)
	if err != nil {
		return store.Entry{}, 0, err
	}
	p.Own(e.Chain)
	p.emit(ctx, &events.Event{Kind: events.MessageQueued, MessageID: e.ID, Chain: e.Chain, Text: e.File})
	p.Resume()
	p.Wake()
	return e, seq, nil
}

// Requeue moves a dead letter back into the inbox.
func (p *Pipeline) Requeue(ctx context.Context, idOrFile string) (store.Entry, error) {
	dead, err := p.d.Store.ListDead()
	if err != nil {
		return store.Entry{}, err
	}
	for _, d := range dead {
		if d.File == idOrFile || d.File == idOrFile+".md" || (d.Note.MessageID != "" && d.Note.MessageID == idOrFile) {
			file, err := p.d.Store.Requeue(d.File)
			if err != nil {
				return store.Entry{}, err
			}
			e, err := p.findInbox(file)
			if err != nil {
				return store.Entry{}, err
			}
			p.emit(ctx, &events.Event{Kind: events.MessageQueued, MessageID: e.ID, Chain: e.Chain, Text: "requeued " + file})
			p.Wake()
			return e, nil
		}
	}
	return store.Entry{}, fmt.Errorf("%w: no dead letter %q in .decree/inbox/dead/", ErrNotFound, idOrFile)
}

func (p *Pipeline) findInbox(file string) (store.Entry, error) {
	entries, err := p.d.Store.ListInbox()
	if err != nil {
		return store.Entry{}, err
	}
	for _, e := range entries {
		if e.File == file {
			return e, nil
		}
	}
	return store.Entry{}, fmt.Errorf("%w: %s is not in the inbox", ErrNotFound, file)
}

// ConflictError lists paths that block a revert.
type ConflictError struct {
	ID    string
	Paths []string
	Err   error
	// Later names the merges of parallel chains that changed those paths
	// after the message ("merge 3 (chain ab12)").
	Later []string
}

func (e *ConflictError) Error() string {
	by := ""
	if len(e.Later) > 0 {
		by = fmt.Sprintf(", changed by the later %s", strings.Join(e.Later, ", "))
	}
	return fmt.Sprintf("cannot revert %s: %d path(s) changed since it completed (%s)%s; undo those changes first or revert the later messages that made them: %v",
		e.ID, len(e.Paths), strings.Join(e.Paths, ", "), by, e.Err)
}

func (e *ConflictError) Unwrap() error { return ErrConflict }

// Revert undoes a completed message: its changes.diff is applied in
// reverse after checking that every file it touched is still as the
// message left it. It returns the paths restored.
func (p *Pipeline) Revert(ctx context.Context, id string) ([]string, error) {
	if err := store.CheckID(id); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	if rid, _, _, ok := p.Running(); ok {
		return nil, fmt.Errorf("%w: message %s is running; revert when the project is idle", ErrConflict, rid)
	}
	run, err := p.d.Store.OpenRun(id)
	if err != nil {
		return nil, err
	}
	st := run.State()
	if st.Outcome != store.OutcomeSucceeded {
		return nil, fmt.Errorf("%w: %s did not complete successfully (outcome %q): only completed messages can be reverted; failed ones were reverted already", ErrConflict, id, st.Outcome)
	}
	if st.Phase == "reverted" || st.Machine.Reverted {
		return nil, fmt.Errorf("%w: %s was already reverted", ErrConflict, id)
	}
	diffPath, _ := run.Path(layout.DiffFile)
	fi, err := os.Stat(diffPath)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", diffPath, err)
	}
	mpath, _ := run.Path(layout.ManifestFile)
	before, err := checkpoint.ReadManifest(mpath)
	if err != nil {
		return nil, err
	}
	paths := diffFiles(diffPath)
	if st.Lane != "" {
		// Its diff describes its lane's tree: only its paths are checked
		// against the project tree (lane_revert.go).
		if before, err = p.laneRevertTarget(ctx, id, before, paths); err != nil {
			return nil, err
		}
	}
	if fi.Size() > 0 {
		// RevertFile and ChangedFile read a large diff as a stream.
		if err := p.d.Checkpoints.RevertFile(ctx, p.d.Store.Root(), diffPath, before); err != nil {
			// Name the paths that changed since only when some did: a
			// damaged diff is reported as such.
			changed, cerr := checkpoint.ChangedFile(p.d.Store.Root(), diffPath)
			switch {
			case errors.Is(err, checkpoint.ErrCorruptDiff) || errors.Is(cerr, checkpoint.ErrCorruptDiff):
				return nil, fmt.Errorf("%w: cannot revert %s: its diff %s is corrupt, so it cannot be undone; nothing was changed: %v", ErrConflict, id, diffPath, err)
			case cerr == nil && len(changed) > 0:
				return nil, &ConflictError{ID: id, Paths: changed, Err: err, Later: p.mergesTouching(id, changed)}
			}
			return nil, fmt.Errorf("%w: cannot revert %s: undoing its diff %s would not reproduce its checkpoint; nothing was changed: %v", ErrConflict, id, diffPath, err)
		}
	}
	if _, err := run.Step(msgstate.Undo); err != nil {
		// A run recorded by an older version has no machine to step.
		_ = run.Update(func(s *store.RunState) error { s.Phase = "reverted"; return nil })
	}
	if e, err := p.messageOf(run); err == nil && e.Type() == message.TypeSpec {
		if cfg, err := p.d.Config(); err == nil {
			_ = p.d.Store.UnmarkProcessed(specName(cfg, e.InputFile()))
		}
	}
	p.emit(ctx, &events.Event{Kind: events.Reverted, MessageID: id, Text: fmt.Sprintf("on request (%d path(s))", len(paths))})
	return paths, nil
}

func (p *Pipeline) messageOf(run *store.Run) (*message.Message, error) {
	mp, err := run.Path(layout.MessageFile)
	if err != nil {
		return nil, err
	}
	return message.ReadHeadFile(mp)
}
