package pipeline

import (
	"context"
	"fmt"

	"github.com/decreehq/decree/controller/diskspace"
	"github.com/decreehq/decree/controller/events"
)

// diskFull checks the free space before the loop takes a message. While
// the disk is full nothing is taken (a message started then could not be
// recorded); the change into and out of that state is logged and emitted
// as a warning event once each, and Problems reports it for status.
func (p *Pipeline) diskFull(ctx context.Context) bool {
	if p.d.Disk == nil {
		return false
	}
	st, changed := p.d.Disk.Check()
	if st.Err != nil {
		p.log.Warn("cannot read the free disk space; going on", "err", st.Err)
	}
	if changed {
		p.reportDisk(ctx, st)
	}
	return st.Full
}

// WriteFailed is told of a write that failed outside the loop (an attempt's
// log, written as a worker streams it): a full disk is marked and reported
// at once, so status and the event log say why the attempt is stuck, and
// the loop takes nothing new until space is freed.
func (p *Pipeline) WriteFailed(err error) {
	p.noSpace(context.Background(), err)
}

// noSpace handles an error of a write that found the disk full: it marks
// the disk full (reporting it) and returns true, so the caller keeps the
// message queued instead of dead-lettering it.
func (p *Pipeline) noSpace(ctx context.Context, err error) bool {
	if p.d.Disk == nil || !diskspace.IsNoSpace(err) {
		return false
	}
	if st, changed := p.d.Disk.MarkFull(); changed {
		p.reportDisk(ctx, st)
	}
	return true
}

func (p *Pipeline) reportDisk(ctx context.Context, st diskspace.State) {
	if st.Full {
		p.log.Error("disk full: processing paused until space is freed", "dir", st.Dir, "free", st.Free, "min_free", st.MinFree)
		p.emit(ctx, &events.Event{Kind: events.Warning, Text: st.String()})
		return
	}
	p.log.Info("disk space available again: processing resumes", "dir", st.Dir, "free", st.Free)
	p.emit(ctx, &events.Event{Kind: events.Warning,
		Text: fmt.Sprintf("disk space is available again on the disk holding %s (%s free): processing resumes", st.Dir, diskspace.Bytes(st.Free))})
}

// Problems lists conditions holding processing up, for status: a full
// disk.
func (p *Pipeline) Problems() []string {
	if p.d.Disk == nil {
		return nil
	}
	if s := p.d.Disk.State().String(); s != "" {
		return []string{s}
	}
	return nil
}
