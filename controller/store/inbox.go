package store

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/decreehq/decree/pkg/fsutil"
	"github.com/decreehq/decree/pkg/layout"
	"github.com/decreehq/decree/pkg/message"
)

// Entry is one message file.
type Entry struct {
	// File is the file name, such as "fix-types.md" or "2025022514320000-1.md".
	File string
	// ID is "<chain>-<seq>"; Chain and Seq are its parts. Empty when Err is set.
	ID    string
	Chain string
	Seq   int
	// Message is the normalised message; nil when Err is set.
	Message *message.Message
	// ModTime is the file's modification time.
	ModTime time.Time
	// Err is set (a *BadMessageError) when the file cannot be used as a
	// message. The file is untouched; the processing loop dead-letters it.
	Err error
}

// Name is the file name without ".md".
func (e Entry) Name() string { return strings.TrimSuffix(e.File, ".md") }

// BadMessageError says why an inbox file is not a usable message.
type BadMessageError struct {
	File   string
	Reason string // a short code for the dead-letter note: InvalidMessage
	Err    error
}

func (e *BadMessageError) Error() string {
	return fmt.Sprintf("inbox file %s is not a usable message (%s): %v", e.File, e.Reason, e.Err)
}

func (e *BadMessageError) Unwrap() error { return e.Err }

// Reason codes written into dead-letter notes by the store and the scheduler.
const (
	ReasonInvalidMessage   = "InvalidMessage"
	ReasonInvalidFollowUp  = "InvalidFollowUp"
	ReasonMaxDepthExceeded = "MaxDepthExceeded"
	// ReasonUnsafeFileName: the file's name holds control characters; it
	// is dead-lettered under a safe name, the note naming the original.
	ReasonUnsafeFileName = "UnsafeFileName"
	// ReasonNotRegularFile: a FIFO, device, socket or symlink; it is moved
	// away without ever being opened.
	ReasonNotRegularFile = "NotRegularFile"
)

// CreateMessage writes a new root message into the inbox and returns it.
// name is the wanted file name without ".md" (already kebab-cased by the
// caller; ".md" is accepted and dropped); it must be a plain name. When a
// file of that name exists in inbox/, inbox/done/ or inbox/dead/, "-2", "-3",
// ... is appended. An empty name becomes "run-<chain>".
//
// m gets a fresh chain id and seq 0 unless its frontmatter already carries
// a chain; it is normalised before it is written. The file is created
// exclusively: an existing file is never overwritten.
func (s *Store) CreateMessage(name string, m *message.Message) (Entry, error) {
	return s.CreateMessageFrom(name, m, bytes.NewReader(m.Body))
}

// CreateMessageFrom is CreateMessage with the body read from body (m.Body
// is ignored), streamed into the file. The entry's message carries no body.
func (s *Store) CreateMessageFrom(name string, m *message.Message, body io.ReadSeeker) (Entry, error) {
	m.Body = nil
	name = strings.TrimSuffix(name, ".md")
	if name != "" {
		if err := message.CheckName(name); err != nil {
			return Entry{}, fmt.Errorf("create message: %w", err)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	in := message.NormalizeInput{}
	if _, ok := m.Get("chain"); !ok {
		in.Chain = s.chains.Next()
		in.Seq = 0
	}
	if name == "" {
		c := in.Chain
		if c == "" {
			c = m.GetString("chain")
		}
		name = "run-" + c
	}
	taken := func(n string) bool {
		for _, d := range []string{layout.Inbox, layout.Done, layout.Dead} {
			if _, err := os.Lstat(s.path(d, n+".md")); err == nil {
				return true
			}
		}
		return false
	}
	for {
		final := message.UniqueName(name, taken)
		in.FileName = final + ".md"
		if err := message.Normalize(m, in); err != nil {
			return Entry{}, fmt.Errorf("create message %s: %w", final, err)
		}
		seq, _ := m.Seq()
		created := Entry{File: in.FileName, ID: m.ID(), Chain: m.Chain(), Seq: seq, Message: m, ModTime: s.now()}
		err := s.ownInboxChange(func() error {
			return writeNewFunc(s.path(layout.Inbox, in.FileName), func(w io.Writer) error {
				if _, err := body.Seek(0, io.SeekStart); err != nil {
					return err
				}
				_, err := m.RenderTo(w, body)
				return err
			})
		}, func(ix *inboxIndex) {
			ix.insert(created)
			if fi, err := os.Lstat(s.path(layout.Inbox, created.File)); err == nil && ix.keys != nil {
				ix.setKey(created.File, keyOf(fi))
			} else {
				ix.valid = false
			}
		})
		if errors.Is(err, fs.ErrExist) {
			continue // created meanwhile by someone else; pick the next name
		}
		if err != nil {
			return Entry{}, fmt.Errorf("create message %s: %w", final, err)
		}
		s.chains.Observe(m.Chain())
		s.notePlaced(created.File)
		return created, nil
	}
}

// writeNew creates path with data, crash-safely and exclusively: the data is
// written to a fsynced temporary file that is hard-linked to path (failing
// with fs.ErrExist when path exists), then the temporary name is removed.
func writeNew(path string, data []byte) error {
	return writeNewFunc(path, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
}

// writeNewFunc is writeNew with the content written by write.
func writeNewFunc(path string, write func(io.Writer) error) error {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("create %s: %w", path, err)
	}
	name := tmp.Name()
	defer os.Remove(name)
	if err := write(tmp); err != nil {
		tmp.Close()
		return fmt.Errorf("create %s: %w", path, err)
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return fmt.Errorf("create %s: %w", path, err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("create %s: fsync: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("create %s: %w", path, err)
	}
	if err := os.Link(name, path); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("create %s: %w", path, fs.ErrExist)
		}
		if !fsutil.LinkUnsupported(err) {
			return fmt.Errorf("create %s: %w", path, err)
		}
		// No hard links on this file system: rename, after checking
		// under the store's lock that the name is free.
		if _, err := os.Lstat(path); err == nil {
			return fmt.Errorf("create %s: %w", path, fs.ErrExist)
		}
		if err := os.Rename(name, path); err != nil {
			return fmt.Errorf("create %s: %w", path, err)
		}
		return fsutil.SyncDir(dir)
	}
	if err := os.Remove(name); err != nil {
		return fmt.Errorf("create %s: remove temporary file: %w", path, err)
	}
	return fsutil.SyncDir(dir)
}

// MarkDone moves inbox/<file> to inbox/done/ and returns the name it got
// there (the same name unless done/ already has one, then "-2", ...).
func (s *Store) MarkDone(file string) (string, error) {
	if err := checkMessageFile(file); err != nil {
		return "", fmt.Errorf("mark message done: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	target := s.freeName(layout.Done, file)
	err := s.ownInboxChange(func() error {
		if err := fsutil.MoveFile(s.path(layout.Inbox, file), s.path(layout.Done, target)); err != nil {
			return fmt.Errorf("mark message %s done: %w", file, err)
		}
		// A note the user moved back into the inbox with the message is stale now.
		_ = os.Remove(s.path(layout.Inbox, file+layout.DeadNoteSuffix))
		return nil
	}, dropEntry(file))
	return target, err
}

// checkMessageFile validates a message file name given by a caller.
func checkMessageFile(file string) error {
	if err := message.CheckName(file); err != nil {
		return err
	}
	if !layout.IsMessageFile(file) {
		return fmt.Errorf("%w: %q is not a message file name (expected NAME.md)", fsutil.ErrUnsafePath, file)
	}
	return nil
}

// freeName returns file, or file with "-2", "-3", ... before ".md", whichever
// is first free in dir (a name is taken when the file or its note exists).
func (s *Store) freeName(dir, file string) string {
	base := strings.TrimSuffix(file, ".md")
	taken := func(n string) bool {
		for _, p := range []string{s.path(dir, n+".md"), s.path(dir, n+".md"+layout.DeadNoteSuffix)} {
			if _, err := os.Lstat(p); err == nil {
				return true
			}
		}
		return false
	}
	if !taken(base) {
		return file
	}
	for i := 2; ; i++ {
		n := fmt.Sprintf("%s-%d", base, i)
		if !taken(n) {
			return n + ".md"
		}
	}
}

// DeadLetter moves inbox/<file> to inbox/dead/, byte for byte, with a note
// saying why, and returns the name it got there.
//
// file may be a name that CheckName refuses (control characters): it is
// moved under a safe name (see deadLetterLocked). It must still be a single
// name inside the inbox.
func (s *Store) DeadLetter(file string, note DeadNote) (string, error) {
	if file == "" || file == "." || file == ".." || strings.ContainsRune(file, '/') {
		return "", fmt.Errorf("dead-letter message: %w: %q is not a file name in the inbox", fsutil.ErrUnsafePath, file)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var name string
	err := s.ownInboxChange(func() error {
		var err error
		if name, err = s.deadLetterLocked(s.path(layout.Inbox, file), file, note); err != nil {
			return err
		}
		if message.CheckName(file) == nil {
			_ = os.Remove(s.path(layout.Inbox, file+layout.DeadNoteSuffix))
		}
		return nil
	}, dropEntry(file))
	return name, err
}

// Skip makes ListInbox ignore inbox/<file> from now on (until the
// controller restarts): a file that had to be refused but could not be
// moved to dead/. It is reported once by the caller, then left alone.
func (s *Store) Skip(file string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.skipped == nil {
		s.skipped = map[string]bool{}
	}
	s.skipped[file] = true
	dropEntry(file)(&s.inbox)
}

// Unskip ends a Skip: the file is listed again.
func (s *Store) Unskip(file string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.skipped[file] {
		delete(s.skipped, file)
		s.inbox.valid = false
	}
}

// deadLetterLocked moves src into dead/ under file (or a free variant),
// writing the note first. s.mu is held.
//
// A file name with control characters (or no ".md") gets a safe name in
// dead/, and the note records the original one.
func (s *Store) deadLetterLocked(src, file string, note DeadNote) (string, error) {
	safe := fsutil.SafeName(file)
	if !layout.IsMessageFile(safe) {
		safe = strings.TrimPrefix(safe, ".") + layout.MessageExt
	}
	if safe != file {
		note.Original = file
	}
	target := s.freeName(layout.Dead, safe)
	if note.Time.IsZero() {
		note.Time = s.now()
	}
	if err := fsutil.WriteFileAtomic(s.path(layout.Dead, target+layout.DeadNoteSuffix), note.render(s.loc), 0o644); err != nil {
		return "", fmt.Errorf("dead-letter %s: write note: %w", file, err)
	}
	if err := fsutil.MoveFile(src, s.path(layout.Dead, target)); err != nil {
		_ = os.Remove(s.path(layout.Dead, target+layout.DeadNoteSuffix))
		return "", fmt.Errorf("dead-letter %s: %w", file, err)
	}
	return target, nil
}

// deadLetterBytes writes content as a new file in dead/ with a note; used
// for files that never existed on disk here (a replica's returned files).
func (s *Store) deadLetterBytes(file string, content []byte, note DeadNote) (string, error) {
	target := s.freeName(layout.Dead, file)
	if note.Time.IsZero() {
		note.Time = s.now()
	}
	if err := fsutil.WriteFileAtomic(s.path(layout.Dead, target+layout.DeadNoteSuffix), note.render(s.loc), 0o644); err != nil {
		return "", fmt.Errorf("dead-letter %s: write note: %w", file, err)
	}
	if err := writeNew(s.path(layout.Dead, target), content); err != nil {
		_ = os.Remove(s.path(layout.Dead, target+layout.DeadNoteSuffix))
		return "", fmt.Errorf("dead-letter %s: %w", file, err)
	}
	return target, nil
}

// Requeue moves inbox/dead/<file> back into the inbox (renamed with "-2",
// ... if the inbox has that name) and removes its note. It returns the new
// inbox file name.
func (s *Store) Requeue(file string) (string, error) {
	if !strings.HasSuffix(file, ".md") {
		file += ".md"
	}
	if err := checkMessageFile(file); err != nil {
		return "", fmt.Errorf("requeue message: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	src := s.path(layout.Dead, file)
	if _, err := os.Lstat(src); err != nil {
		return "", fmt.Errorf("requeue %s: no such message in %s: %w", file, s.path(layout.Dead), err)
	}
	target := s.freeName(layout.Inbox, file)
	if err := fsutil.MoveFile(src, s.path(layout.Inbox, target)); err != nil {
		return "", fmt.Errorf("requeue %s: %w", file, err)
	}
	s.notePlaced(target)
	if err := os.Remove(s.path(layout.Dead, file+layout.DeadNoteSuffix)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return target, fmt.Errorf("requeue %s: remove note: %w", file, err)
	}
	return target, fsutil.SyncDir(s.path(layout.Dead))
}

// notePlaced records that the store put inbox/<file> there itself. s.mu
// is held.
func (s *Store) notePlaced(file string) {
	if s.placed == nil {
		s.placed = map[string]bool{}
	}
	s.placed[file] = true
}

// DeadEntry is a message in inbox/dead/ with its note.
type DeadEntry struct {
	File string
	// Note is the parsed note; Reason is empty when the file has none
	// (moved there by hand).
	Note DeadNote
}

// ListDead returns the messages in inbox/dead/ by file name.
func (s *Store) ListDead() ([]DeadEntry, error) {
	dir := s.path(layout.Dead)
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("list dead letters %s: %w", dir, err)
	}
	var out []DeadEntry
	for _, de := range ents {
		if !layout.IsMessageFile(de.Name()) || de.IsDir() {
			continue
		}
		d := DeadEntry{File: de.Name()}
		if note, err := fsutil.ReadRegular(filepath.Join(dir, d.File+layout.DeadNoteSuffix)); err == nil {
			d.Note = parseNote(note)
		}
		out = append(out, d)
	}
	return out, nil
}

// ListDone returns the file names in inbox/done/, sorted.
func (s *Store) ListDone() ([]string, error) {
	dir := s.path(layout.Done)
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("list done messages %s: %w", dir, err)
	}
	var out []string
	for _, de := range ents {
		if layout.IsMessageFile(de.Name()) && !de.IsDir() {
			out = append(out, de.Name())
		}
	}
	return out, nil
}

// DeadNote explains why a message was dead-lettered.
type DeadNote struct {
	// Reason is a short code: MaxDepthExceeded, InvalidMessage,
	// InvalidFollowUp, RetriesExhausted, RoutineNotFound, ...
	Reason string
	// MessageID is the message's id when known.
	MessageID string
	// Original is the file's name when it was dead-lettered under another,
	// safe name (its own held control characters).
	Original string
	// Time is when it happened (now when zero).
	Time time.Time
	// Detail is free text for people: what failed and what to do.
	Detail string
}

// render writes the note as "key: value" lines, a blank line, then Detail.
func (n DeadNote) render(loc *time.Location) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "reason: %s\n", oneLine(n.Reason))
	if n.MessageID != "" {
		fmt.Fprintf(&b, "message_id: %s\n", oneLine(n.MessageID))
	}
	if n.Original != "" {
		fmt.Fprintf(&b, "original_name: %s\n", strconv.Quote(n.Original))
	}
	fmt.Fprintf(&b, "time: %s\n", n.Time.In(loc).Format(time.RFC3339))
	b.WriteString("\n")
	b.WriteString(strings.TrimRight(n.Detail, "\n"))
	b.WriteString("\n")
	return b.Bytes()
}

func oneLine(s string) string { return strings.ReplaceAll(strings.ReplaceAll(s, "\r", " "), "\n", " ") }

func parseNote(data []byte) DeadNote {
	var n DeadNote
	head, detail, _ := strings.Cut(string(data), "\n\n")
	for _, line := range strings.Split(head, "\n") {
		k, v, ok := strings.Cut(line, ": ")
		if !ok {
			continue
		}
		switch k {
		case "reason":
			n.Reason = v
		case "message_id":
			n.MessageID = v
		case "original_name":
			n.Original, _ = strconv.Unquote(v)
		case "time":
			n.Time, _ = time.Parse(time.RFC3339, v)
		}
	}
	n.Detail = strings.TrimRight(detail, "\n")
	return n
}

// DeadLetterDone moves a message already in done/ (file is its name there)
// to dead/ with note: the change of a parallel chain that could not be
// merged. A file no longer in done/ (moved on an earlier try) is not an
// error when dead/ has it: the call can be repeated after a crash.
func (s *Store) DeadLetterDone(file string, note DeadNote) (string, error) {
	if err := checkMessageFile(file); err != nil {
		return "", fmt.Errorf("dead-letter a done message: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	src := s.path(layout.Done, file)
	if _, err := os.Lstat(src); err != nil {
		if _, derr := os.Lstat(s.path(layout.Dead, file)); derr == nil {
			return file, nil
		}
		return "", fmt.Errorf("dead-letter %s: it is not in .decree/inbox/done/: %w", file, err)
	}
	return s.deadLetterLocked(src, file, note)
}
