package replica

import (
	"fmt"

	"github.com/decreehq/decree/controller/store"
	"github.com/decreehq/decree/pkg/fsutil"
	"github.com/decreehq/decree/pkg/layout"
	decreev1 "github.com/decreehq/decree/proto/decree/v1"
)

// FollowUps receives follow-up files (store.Store does).
type FollowUps interface {
	ReceiveFollowUp(chain string, seq int, area, name string, content []byte) (*store.Rejected, error)
}

// RunDir receives run-directory artifacts (store.Run does).
type RunDir interface {
	WriteFile(name string, data []byte) error
}

// DeliverFiles puts the files a replica worker returned for message
// <chain>-<seq> where they belong: follow-ups into the inbox or outbox
// (through ReceiveFollowUp, which dead-letters badly named ones), artifacts
// into the run directory. run may be nil (work outside any message), and
// then artifacts are dropped. It returns a note per file that was refused
// or rejected; an error only when storing failed.
func DeliverFiles(fu FollowUps, chain string, seq int, run RunDir, files []*decreev1.ReturnedFile) ([]string, error) {
	var notes []string
	for _, f := range files {
		name := f.GetName()
		switch f.GetArea() {
		case decreev1.ReturnedFileArea_RETURNED_FILE_AREA_INBOX, decreev1.ReturnedFileArea_RETURNED_FILE_AREA_OUTBOX:
			if chain == "" {
				notes = append(notes, fmt.Sprintf("follow-up %q ignored: the work belonged to no message", name))
				continue
			}
			area := store.AreaInbox
			if f.GetArea() == decreev1.ReturnedFileArea_RETURNED_FILE_AREA_OUTBOX {
				area = store.AreaOutbox
			}
			rej, err := fu.ReceiveFollowUp(chain, seq, area, name, f.GetContent())
			if err != nil {
				return notes, err
			}
			if rej != nil {
				notes = append(notes, fmt.Sprintf("follow-up %s rejected: %s", rej.Source, rej.Note.Detail))
			}
		case decreev1.ReturnedFileArea_RETURNED_FILE_AREA_RUN_DIR:
			if run == nil {
				notes = append(notes, fmt.Sprintf("run file %q ignored: the work belonged to no message", name))
				continue
			}
			if err := fsutil.CheckName("run file", name); err != nil {
				notes = append(notes, fmt.Sprintf("run file refused: %v", err))
				continue
			}
			if layout.ControllerOwned(name) {
				notes = append(notes, fmt.Sprintf("run file %q refused: the controller writes that file itself", name))
				continue
			}
			if err := run.WriteFile(name, f.GetContent()); err != nil {
				return notes, fmt.Errorf("store run file %s: %w", name, err)
			}
		default:
			notes = append(notes, fmt.Sprintf("returned file %q refused: unknown area %v", name, f.GetArea()))
		}
	}
	return notes, nil
}
