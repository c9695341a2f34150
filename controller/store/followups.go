package store

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sort"
	"strconv"
	"strings"

	"github.com/decreehq/decree/pkg/fsutil"
	"github.com/decreehq/decree/pkg/layout"
	"github.com/decreehq/decree/pkg/message"
)

// IsFollowUpName reports whether an inbox file name has the shape of a
// follow-up a routine writes, "<chain>-<seq>.md". Other names in the inbox
// are messages queued by hand or by other tools, never an attempt's.
func IsFollowUpName(name string) bool {
	stem, ok := strings.CutSuffix(name, ".md")
	if !ok {
		return false
	}
	a, b, ok := strings.Cut(stem, "-")
	return ok && allDigits(a) && allDigits(b)
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

// FollowUp is a follow-up message queued by CollectFollowUps.
type FollowUp struct {
	// File is its inbox file name, "<chain>-<seq>.md".
	File string
	ID   string
	Seq  int
	// Source says where it came from: "inbox/<name>" or "outbox/<name>".
	Source string
}

// Rejected is a follow-up that was dead-lettered instead of queued. It is
// a message of its own: Note.MessageID is its id in the chain, and DeadFile
// is named after it.
type Rejected struct {
	Source string
	// DeadFile is its name in inbox/dead/.
	DeadFile string
	Note     DeadNote
}

// Collected is what CollectFollowUps did.
type Collected struct {
	// FollowUps are queued, in seq order.
	FollowUps []FollowUp
	// Rejected were dead-lettered with a note.
	Rejected []Rejected
	// Ignored are outbox entries that are not "*.md" files; they stay put.
	Ignored []string
}

// CollectFollowUps gathers the follow-ups a routine left after an attempt
// of message <chain>-<seq>:
//
//   - Files the routine wrote into the inbox (not in before) whose names
//     look like "<digits>-<digits>.md" must be "<chain>-<n>.md" of this
//     chain with n > seq and must parse; they stay where they are. Any other
//     such file is dead-lettered with an InvalidFollowUp note. New inbox
//     files with other names are left alone: they are ordinary messages (a
//     user may drop one in at any time) and get a chain of their own.
//   - Files in outbox/ named "*.md" are taken in lexical order and moved
//     into the inbox as "<chain>-<next>.md" with consecutive seqs, next
//     being one more than the highest seq of this chain anywhere in the
//     inbox, done/, dead/ and runs/. Their chain, seq and id fields are
//     set to match. A file that does not parse is dead-lettered instead.
//
// A dead-lettered follow-up is a message of its own: it keeps the id its
// name gives it when that is a valid follow-up name of this chain, else it
// gets the next free seq after the queued follow-ups (so those keep theirs).
// Its file in dead/ is named after its id.
func (s *Store) CollectFollowUps(chain string, seq int, before InboxSnapshot) (Collected, error) {
	var out Collected
	if !message.ValidChain(chain) {
		return out, fmt.Errorf("collect follow-ups: %q is not a chain id", chain)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	defer s.releaseSnapshotLocked()
	curID := chain + "-" + strconv.Itoa(seq)
	var rejects []reject

	names, err := s.newInboxNamesLocked(before)
	if err != nil {
		return out, fmt.Errorf("collect follow-ups of %s: list inbox: %w", curID, err)
	}
	for _, name := range names {
		fi, err := os.Lstat(s.path(layout.Inbox, name))
		if err != nil || fi.IsDir() {
			continue
		}
		src := "inbox/" + name
		problem := checkFollowUpName(name, chain, seq)
		if problem == "" && !fi.Mode().IsRegular() {
			problem = "it is not a regular file (a symlink?); write the follow-up as a plain file"
		}
		if problem == "" {
			problem = s.checkFollowUpContent(s.path(layout.Inbox, name))
		}
		if problem != "" {
			// A rejected follow-up keeps the id its name gives it in this
			// chain; one without gets the next free id after the queued
			// follow-ups (below).
			file := ""
			if checkFollowUpName(name, chain, seq) == "" {
				file = name
			}
			rejects = append(rejects, reject{path: s.path(layout.Inbox, name), file: file, source: src, problem: problem})
			continue
		}
		_, n, _ := message.ChainFromFileName(name)
		out.FollowUps = append(out.FollowUps, FollowUp{File: name, ID: chain + "-" + strconv.Itoa(n), Seq: n, Source: src})
	}

	next := -1 // found when the outbox holds a follow-up (maxSeqLocked reads four directories)
	obox, err := os.ReadDir(s.path(layout.Outbox))
	if err != nil {
		return out, fmt.Errorf("collect follow-ups of %s: list outbox: %w", curID, err)
	}
	sort.Slice(obox, func(i, j int) bool { return obox[i].Name() < obox[j].Name() })
	for _, de := range obox {
		name := de.Name()
		if isTemp(name) {
			continue
		}
		if !layout.IsMessageFile(name) || de.IsDir() {
			out.Ignored = append(out.Ignored, "outbox/"+name)
			continue
		}
		src := "outbox/" + name
		p := s.path(layout.Outbox, name)
		if next < 0 {
			next = s.maxSeqLocked(chain, seq) + 1
		}
		target := fmt.Sprintf("%s-%d.md", chain, next)
		m, problem := s.outboxMessage(p, de, target)
		if problem != "" {
			rejects = append(rejects, reject{path: p, source: src, problem: problem})
			continue
		}
		// Rewrite in place first, then rename: a crash in between leaves
		// the file in outbox/, collected again next time.
		if err := rewriteFile(p, p, m, true); err != nil {
			return out, fmt.Errorf("collect follow-up %s of %s: %w", src, curID, err)
		}
		if _, err := os.Lstat(s.path(layout.Inbox, target)); err == nil {
			return out, fmt.Errorf("collect follow-up %s of %s: inbox/%s appeared meanwhile; run the collection again", src, curID, target)
		}
		if err := fsutil.MoveFile(p, s.path(layout.Inbox, target)); err != nil {
			return out, fmt.Errorf("collect follow-up %s of %s: %w", src, curID, err)
		}
		out.FollowUps = append(out.FollowUps, FollowUp{File: target, ID: chain + "-" + strconv.Itoa(next), Seq: next, Source: src})
		next++
	}
	sort.SliceStable(out.FollowUps, func(i, j int) bool { return out.FollowUps[i].Seq < out.FollowUps[j].Seq })
	for _, r := range rejects {
		if r.file == "" {
			if next < 0 {
				next = s.maxSeqLocked(chain, seq) + 1
			}
			r.file = fmt.Sprintf("%s-%d.md", chain, next)
			next++
		}
		note := DeadNote{Reason: ReasonInvalidFollowUp, MessageID: layout.MessageStem(r.file),
			Detail: fmt.Sprintf("Follow-up %s written by the routine of %s was rejected: %s.", r.source, curID, r.problem)}
		dead, err := s.deadLetterLocked(r.path, r.file, note)
		if err != nil {
			return out, err
		}
		out.Rejected = append(out.Rejected, Rejected{Source: r.source, DeadFile: dead, Note: note})
	}
	return out, nil
}

// newInboxNamesLocked lists the follow-up-shaped names in the inbox that
// are not in before and were not put there by the store itself since the
// last snapshot (a message created or requeued by a client meanwhile),
// sorted. They come from the inbox index, brought up to date first; when
// before is the last snapshot this store took, only the names the index
// gained since are looked at. s.mu is held.
func (s *Store) newInboxNamesLocked(before InboxSnapshot) ([]string, error) {
	if _, err := s.inboxLocked(); err != nil {
		return nil, err
	}
	var out []string
	add := func(n string) {
		if !before.Has(n) && !s.placed[n] && IsFollowUpName(n) {
			out = append(out, n)
		}
	}
	if d := &s.inbox.snap; before.gen != 0 && before.gen == d.gen {
		for n := range d.fresh {
			add(n)
		}
	} else {
		for n := range s.inbox.keys {
			add(n)
		}
	}
	for n := range s.inbox.pending {
		add(n)
	}
	sort.Strings(out)
	return out, nil
}

// reject is a follow-up CollectFollowUps dead-letters: the file at path,
// under the name file ("" for the next free id of the chain).
type reject struct {
	path, file, source, problem string
}

// checkFollowUpName returns why name is not a follow-up of <chain>-<seq>, or "".
func checkFollowUpName(name, chain string, seq int) string {
	if err := message.CheckName(name); err != nil {
		return err.Error()
	}
	c, n, ok := message.ChainFromFileName(name)
	switch {
	case !ok:
		return fmt.Sprintf("the name %q is not <chain>-<seq>.md with a 16-digit chain id", name)
	case c != chain:
		return fmt.Sprintf("it belongs to chain %s, not to this message's chain %s; a routine may only add follow-ups to its own chain (or write them to .decree/outbox/)", c, chain)
	case n <= seq:
		return fmt.Sprintf("its seq %d is not greater than the current seq %d; follow-ups must come later in the chain", n, seq)
	}
	return ""
}

// checkFollowUpContent returns why the file is not a usable message, or "".
func (s *Store) checkFollowUpContent(p string) string {
	m, problem := readFollowUp(p)
	if problem != "" {
		return problem
	}
	if err := message.Normalize(m, message.NormalizeInput{FileName: fileBase(p)}); err != nil {
		return err.Error()
	}
	return ""
}

// readFollowUp reads a follow-up's frontmatter (its body stays on disk),
// or says why it cannot.
func readFollowUp(p string) (*message.Message, string) {
	m, err := readHeadFile(p)
	var pe *message.ParseError
	switch {
	case errors.As(err, &pe):
		return nil, "it does not parse: " + err.Error()
	case err != nil:
		return nil, "it cannot be read: " + err.Error()
	}
	return m, ""
}

func fileBase(p string) string {
	if i := strings.LastIndexByte(p, '/'); i >= 0 {
		return p[i+1:]
	}
	return p
}

// outboxMessage reads an outbox file and normalises it as target.
func (s *Store) outboxMessage(p string, de fs.DirEntry, target string) (*message.Message, string) {
	if !de.Type().IsRegular() {
		return nil, "it is not a regular file (a symlink?); write the follow-up as a plain file"
	}
	m, problem := readFollowUp(p)
	if problem != "" {
		return nil, problem
	}
	m.Delete("id")
	m.Delete("chain")
	m.Delete("seq")
	if err := message.Normalize(m, message.NormalizeInput{FileName: target}); err != nil {
		return nil, err.Error()
	}
	// The inbox file is named after its id; listings show this name.
	m.Set(message.OutboxFileField, de.Name())
	return m, ""
}

// maxSeqLocked is the highest seq of chain among file names in the inbox,
// done/, dead/ and run directories, at least floor.
func (s *Store) maxSeqLocked(chain string, floor int) int {
	max := floor
	for _, d := range []string{layout.Inbox, layout.Done, layout.Dead, layout.Runs} {
		ents, err := os.ReadDir(s.path(d))
		if err != nil {
			continue
		}
		for _, e := range ents {
			name := e.Name()
			if d == layout.Runs {
				name += ".md"
			}
			if c, n, ok := message.ChainFromFileName(name); ok && c == chain && n > max {
				max = n
			}
		}
	}
	return max
}

// Areas a replica worker returns follow-ups to.
const (
	AreaInbox  = "inbox"
	AreaOutbox = "outbox"
)

// ReceiveFollowUp stores a follow-up that a replica worker sent back for
// message <chain>-<seq>: into inbox/ under its own name (area AreaInbox:
// the name must be "<chain>-<n>.md" of this chain with n > seq) or into
// outbox/ (area AreaOutbox: any plain "*.md" name), where CollectFollowUps
// then picks it up. A name that breaks these rules (including names that
// try to leave the directory, such as "../x.md") is not written where it
// asked: the content goes to inbox/dead/ under a safe name, with a note,
// and the rejection is returned.
func (s *Store) ReceiveFollowUp(chain string, seq int, area, name string, content []byte) (*Rejected, error) {
	curID := chain + "-" + strconv.Itoa(seq)
	var problem string
	switch area {
	case AreaInbox:
		problem = checkFollowUpName(name, chain, seq)
	case AreaOutbox:
		if err := message.CheckName(name); err != nil {
			problem = err.Error()
		} else if !layout.IsMessageFile(name) {
			problem = fmt.Sprintf("the name %q does not end in .md (or starts with '.')", name)
		}
	default:
		return nil, fmt.Errorf("receive follow-up of %s: unknown area %q (want %q or %q)", curID, area, AreaInbox, AreaOutbox)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if problem == "" {
		dst := s.path(area, name)
		var err error
		if area == AreaInbox {
			err = writeNew(dst, content)
			if errors.Is(err, fs.ErrExist) {
				problem = fmt.Sprintf("inbox/%s already exists", name)
			}
		} else {
			err = fsutil.WriteFileAtomic(dst, content, 0o644)
		}
		if problem == "" {
			if err != nil {
				return nil, fmt.Errorf("receive follow-up %s/%s of %s: %w", area, name, curID, err)
			}
			return nil, nil
		}
	}
	// Dead-lettered under an id of its own in this chain.
	file := fmt.Sprintf("%s-%d.md", chain, s.maxSeqLocked(chain, seq)+1)
	note := DeadNote{Reason: ReasonInvalidFollowUp, MessageID: layout.MessageStem(file),
		Detail: fmt.Sprintf("Follow-up %q (area %s) returned by the worker for %s was rejected: %s.", name, area, curID, problem)}
	dead, err := s.deadLetterBytes(file, content, note)
	if err != nil {
		return nil, err
	}
	return &Rejected{Source: area + "/" + name, DeadFile: dead, Note: note}, nil
}
