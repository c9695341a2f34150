package store

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/decreehq/decree/pkg/layout"
	"github.com/decreehq/decree/pkg/message"
)

// ErrNotFound is returned (wrapped) when a message or run asked for by id
// or name does not exist.
var ErrNotFound = errors.New("not found")

// ErrDamaged is returned (wrapped) when a record the store wrote cannot be
// read back (a damaged state.json): the run exists, but its state is lost.
var ErrDamaged = errors.New("damaged record")

// MessageState is where a message is in its life.
type MessageState int

// Message states as listings report them. Which inbox message is running
// is the processing loop's knowledge, not the store's.
const (
	StateQueued MessageState = iota + 1
	StateDone
	StateDead
	// StateInterrupted is a queued message whose last attempt did not end
	// (stopped by a shutdown, or its controller died); Attempt is its
	// number.
	StateInterrupted
)

// MessageView is one message as listings show it.
type MessageView struct {
	// ID is "<chain>-<seq>" when known (a message that could not be
	// parsed has none).
	ID    string
	Name  string // the file name without ".md"
	Chain string
	Seq   int
	State MessageState
	// Message is the parsed message; nil when it cannot be parsed.
	Message *message.Message
	// Attempt is the interrupted attempt of a StateInterrupted message.
	Attempt int
	// Problem says why a dead message died, or why a queued file is not a
	// usable message.
	Problem string
}

// Messages lists the inbox (queued), inbox/done/ and inbox/dead/, in that
// order; within the inbox in processing order.
func (s *Store) Messages() ([]MessageView, error) {
	out, err := s.inboxViews()
	if err != nil {
		return nil, err
	}
	done, err := s.ListDone()
	if err != nil {
		return nil, err
	}
	for _, f := range done {
		v := MessageView{Name: layout.MessageStem(f), State: StateDone}
		v.fillFrom(s.path(layout.Done, f))
		out = append(out, v)
	}
	dead, err := s.ListDead()
	if err != nil {
		return nil, err
	}
	for _, d := range dead {
		v := MessageView{ID: d.Note.MessageID, Name: layout.MessageStem(d.File), State: StateDead,
			Problem: strings.TrimSpace(d.Note.Reason + ": " + firstLine(d.Note.Detail))}
		v.fillFrom(s.path(layout.Dead, d.File))
		out = append(out, v)
	}
	return out, nil
}

// inboxViews lists the inbox (from the index) as views, marking
// interrupted messages.
func (s *Store) inboxViews() ([]MessageView, error) {
	inbox, err := s.ListInbox()
	if err != nil {
		return nil, err
	}
	out := make([]MessageView, 0, len(inbox))
	for _, e := range inbox {
		v := MessageView{ID: e.ID, Name: e.Name(), Chain: e.Chain, Seq: e.Seq, State: StateQueued, Message: e.Message}
		if e.Err != nil {
			v.Problem = e.Err.Error()
		} else if n, ok := s.InterruptedAttempt(e.ID); ok {
			v.State, v.Attempt = StateInterrupted, n
		}
		out = append(out, v)
	}
	return out, nil
}

// Summary is what status shows: counts, and the queued messages that
// need a person's attention.
type Summary struct {
	// Queued counts inbox messages (interrupted ones included).
	Queued int
	// Interrupted are queued messages whose last attempt did not end.
	Interrupted []MessageView
	Done, Dead  int
}

// Summarize counts the inbox (from the index), done/ and dead/ (by name,
// cached while the directory is unchanged), and finds interrupted
// messages among the runs without an outcome; no message file is read, so
// status costs little however long the queue or the history.
func (s *Store) Summarize() (Summary, error) {
	var sum Summary
	s.mu.Lock()
	if s.inbox.keys == nil {
		// No index yet (a fresh process, e.g. status with no controller):
		// count names instead of reading every queued file.
		sum, err := s.summarizeByNamesLocked()
		s.mu.Unlock()
		if err != nil {
			return sum, err
		}
		return s.finishSummary(sum)
	}
	es, err := s.inboxLocked()
	if err != nil {
		s.mu.Unlock()
		return sum, err
	}
	sum.Queued = len(es)
	open := s.openRunsLocked()
	queued := make(map[string]int, len(open))
	if len(open) > 0 {
		for id := range open {
			if i, ok := findID(es, id); ok {
				queued[id] = i
			}
		}
	}
	for id, i := range queued {
		if n, ok := s.InterruptedAttempt(id); ok {
			e := es[i]
			sum.Interrupted = append(sum.Interrupted, MessageView{ID: e.ID, Name: e.Name(), Chain: e.Chain, Seq: e.Seq, State: StateInterrupted, Attempt: n, Message: e.Message})
		}
	}
	s.mu.Unlock()
	return s.finishSummary(sum)
}

// finishSummary sorts the interrupted messages and counts done and dead.
func (s *Store) finishSummary(sum Summary) (Summary, error) {
	sort.Slice(sum.Interrupted, func(i, j int) bool { return message.IDLess(sum.Interrupted[i].ID, sum.Interrupted[j].ID) })
	var err2 error
	if sum.Done, err2 = s.countDir(layout.Done); err2 != nil {
		return sum, err2
	}
	if sum.Dead, err2 = s.countDir(layout.Dead); err2 != nil {
		return sum, err2
	}
	return sum, nil
}

// QueuedView returns the view of a queued message by id (for status's
// running message).
func (s *Store) QueuedView(id string) (MessageView, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	es, err := s.inboxLocked()
	if err != nil {
		return MessageView{}, false
	}
	i, ok := findID(es, id)
	if !ok {
		return MessageView{}, false
	}
	e := es[i]
	return MessageView{ID: e.ID, Name: e.Name(), Chain: e.Chain, Seq: e.Seq, State: StateQueued, Message: e.Message}, true
}

// fillFrom sets the message's frontmatter, read from the file at path
// (never its body), and, where still unknown, its id parts.
func (v *MessageView) fillFrom(path string) {
	if chain, seq, ok := message.SplitID(v.ID); ok && v.Chain == "" {
		v.Chain, v.Seq = chain, seq
	}
	m, err := readHeadFile(path)
	if err != nil {
		return
	}
	v.Message = m
	if v.Chain == "" {
		v.Chain = m.Chain()
	}
	if seq, ok := m.Seq(); ok && v.Seq == 0 {
		v.Seq = seq
	}
	if v.ID == "" {
		v.ID = m.ID()
	}
}

// FindMessage returns the message with this id, file name or name (file
// name without ".md"), wherever it is.
func (s *Store) FindMessage(idOrName string) (MessageView, error) {
	all, err := s.Messages()
	if err != nil {
		return MessageView{}, err
	}
	for _, v := range all {
		if v.ID == idOrName || v.Name == idOrName || v.Name+layout.MessageExt == idOrName {
			return v, nil
		}
	}
	return MessageView{}, fmt.Errorf("%w: no message %q in the inbox, done or dead", ErrNotFound, idOrName)
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(strings.TrimSpace(s), "\n")
	return line
}

// countDir counts the message files in a .decree/ directory, from the
// directory cache while the directory is unchanged (dircache.go).
func (s *Store) countDir(rel string) (int, error) {
	if f, ok := s.cachedFacts(rel); ok {
		return f.Messages, nil
	}
	_, f, err := s.listFacts(rel)
	if err != nil {
		return 0, fmt.Errorf("count %s: %w", rel, err)
	}
	return f.Messages, nil
}

// summarizeByNamesLocked is Summarize from the inbox's names and the open
// runs alone: only the files of interrupted messages are read, so its cost
// does not grow with the queue's length. s.mu is held.
func (s *Store) summarizeByNamesLocked() (Summary, error) {
	var sum Summary
	if f, ok := s.cachedFacts(layout.Inbox); ok && len(s.skipped) == 0 {
		sum.Queued = f.Messages
		s.reusedOpen = true
	} else {
		ents, f, err := s.listFacts(layout.Inbox)
		if err != nil {
			return sum, fmt.Errorf("list inbox: %w", err)
		}
		sum.Queued = f.Messages
		for _, e := range ents {
			if s.skipped[e.Name()] && layout.IsMessageFile(e.Name()) && !e.IsDir() {
				sum.Queued--
			}
		}
	}
	for id := range s.openRunsLocked() {
		st, err := readState(s.path(layout.Runs, id))
		if err != nil || !layout.IsMessageFile(st.File) || s.skipped[st.File] {
			continue
		}
		// readHeadFile below fails when the file is no longer queued.
		n, ok := s.InterruptedAttempt(id)
		if !ok {
			continue
		}
		m, err := readHeadFile(s.path(layout.Inbox, st.File))
		if err != nil || m.ID() != id {
			continue
		}
		seq, _ := m.Seq()
		sum.Interrupted = append(sum.Interrupted, MessageView{ID: id, Name: strings.TrimSuffix(st.File, layout.MessageExt), Chain: m.Chain(), Seq: seq,
			State: StateInterrupted, Attempt: n, Message: m})
	}
	return sum, nil
}
