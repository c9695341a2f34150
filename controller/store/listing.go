package store

import (
	"errors"
	"fmt"
	"os"
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
	// Problem says why a dead message died, or why a queued file is not a
	// usable message.
	Problem string
}

// Messages lists the inbox (queued), inbox/done/ and inbox/dead/, in that
// order; within the inbox in processing order.
func (s *Store) Messages() ([]MessageView, error) {
	var out []MessageView
	inbox, err := s.ListInbox()
	if err != nil {
		return nil, err
	}
	for _, e := range inbox {
		v := MessageView{ID: e.ID, Name: e.Name(), Chain: e.Chain, Seq: e.Seq, State: StateQueued, Message: e.Message}
		if e.Err != nil {
			v.Problem = e.Err.Error()
		}
		out = append(out, v)
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

// Runs opens the run directories of a chain (every chain when chain is
// ""), newest first, at most limit of them (all when limit <= 0). Runs
// whose state cannot be read are left out.
func (s *Store) Runs(chain string, limit int) ([]*Run, error) {
	ents, err := os.ReadDir(s.path(layout.Runs))
	if err != nil {
		return nil, fmt.Errorf("list runs: %w", err)
	}
	var ids []string
	for _, e := range ents {
		if e.IsDir() && CheckID(e.Name()) == nil && (chain == "" || strings.HasPrefix(e.Name(), chain+"-")) {
			ids = append(ids, e.Name())
		}
	}
	sort.Slice(ids, func(i, j int) bool { return message.IDLess(ids[j], ids[i]) })
	var out []*Run
	for _, id := range ids {
		run, err := s.OpenRun(id)
		if err != nil {
			continue
		}
		out = append(out, run)
		if limit > 0 && len(out) == limit {
			break
		}
	}
	return out, nil
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(strings.TrimSpace(s), "\n")
	return line
}
