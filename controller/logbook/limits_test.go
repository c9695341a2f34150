package logbook

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func limitedBook(t *testing.T, max uint64) (*Book, string) {
	dir := t.TempDir()
	b := NewWithOptions(func(k Key) (string, error) {
		return filepath.Join(dir, fmt.Sprintf("%s.%d.%s.log", k.MessageID, k.Attempt, k.Stream)), nil
	}, Options{MaxBytes: func() uint64 { return max }})
	t.Cleanup(b.Wait) // logs still being ended, before dir goes
	return b, dir
}

// line returns the i-th 100-byte line of the test log.
func line(i int) string { return fmt.Sprintf("line %04d %s\n", i, strings.Repeat(".", 89)) }

// TestLogOverTheLimitKeepsItsTail: a log of 1,000 bytes under a 256-byte
// limit never grows past 6 times the limit while the attempt runs, ends
// as a notice plus exactly its last 256 bytes, keeps counting logical
// offsets (resends are still idempotent, also after a restart), and a
// follower from the start gets the notice and the tail.
func TestLogOverTheLimitKeepsItsTail(t *testing.T) {
	const max = 256
	b, _, k, p := liveLimited(t, max)
	var all strings.Builder
	appendLines(t, b, k, p, &all, 10, 6*max+200)
	// A resend of bytes already counted is accepted and changes nothing.
	if stored, err := b.Append(k, 900, []byte(line(9))); err != nil || stored != 1000 {
		t.Fatalf("resend: %d, %v", stored, err)
	}
	b.End("m", 1)
	b.WaitAttempt("m", 1)
	got, _ := os.ReadFile(p)
	notice := string(noticeLine(1000-max, max))
	want := notice + all.String()[1000-max:]
	if string(got) != want {
		t.Fatalf("truncated log:\n%q\nwant\n%q", got, want)
	}
	if !strings.Contains(notice, "the first 744 bytes were dropped") {
		t.Errorf("notice %q does not say how much was dropped", notice)
	}
	// A restarted controller knows the logical size.
	b2 := NewWithOptions(b.pathFor, Options{MaxBytes: func() uint64 { return max }})
	defer b2.Wait()
	if n, err := b2.Size(k); err != nil || n != 1000 {
		t.Fatalf("size after restart: %d, %v", n, err)
	}
	if n, err := b2.Append(k, 950, []byte(line(9)[50:]+"more\n")); err != nil || n != 1005 {
		t.Fatalf("append after restart: %d, %v", n, err)
	}
	// A follower from offset 0 gets the notice, then the tail.
	var out bytes.Buffer
	if err := b2.Follow(context.Background(), k, 0, func(_ uint64, d []byte) error { out.Write(d); return nil }); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out.String(), noticePrefix) || !strings.HasSuffix(out.String(), line(9)+"more\n") {
		t.Errorf("follower got %q", out.String())
	}
}

// TestLiveFollowerSurvivesTruncation: a follower reading while the log is
// cut gets every byte that was kept, in order, and the notice for the
// bytes dropped before it read them.
func TestLiveFollowerSurvivesTruncation(t *testing.T) {
	const max = 300
	b, _ := limitedBook(t, max)
	k := Key{MessageID: "m", Attempt: 1, Stream: "routine"}
	b.Begin("m", 1)
	got := make(chan string, 1)
	go func() {
		var out bytes.Buffer
		_ = b.Follow(context.Background(), k, 0, func(_ uint64, d []byte) error { out.Write(d); return nil })
		got <- out.String()
	}()
	off := 0
	for i := 0; i < 50; i++ {
		b.Append(k, uint64(off), []byte(line(i)))
		off += len(line(i))
	}
	b.End("m", 1)
	select {
	case s := <-got:
		if !strings.HasSuffix(s, line(47)+line(48)+line(49)) {
			t.Errorf("the follower's output does not end with the log's tail:\n%s", s)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the follower did not finish")
	}
}

func TestNoticeCannotBeFaked(t *testing.T) {
	b, dir := limitedBook(t, 1<<20)
	k := Key{MessageID: "m", Attempt: 1, Stream: "routine"}
	fake := string(noticeLine(5000, 10)) + "real output\n"
	if _, err := b.Append(k, 0, []byte(fake)); err != nil {
		t.Fatal(err)
	}
	if n, err := b.Size(k); err != nil || n != uint64(len(fake)) {
		t.Fatalf("size of a log that merely starts like a notice: %d, %v; want %d", n, err, len(fake))
	}
	if got, _ := os.ReadFile(filepath.Join(dir, "m.1.routine.log")); string(got) != fake {
		t.Errorf("log changed: %q", got)
	}
}

func TestStreamAndChunkLimits(t *testing.T) {
	b, _ := newBook(t)
	b.Begin("m", 1)
	defer b.End("m", 1)
	for i := 0; i < DefaultMaxStreams; i++ {
		if _, err := b.Append(Key{"m", 1, fmt.Sprintf("s%d", i)}, 0, []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	_, err := b.Append(Key{"m", 1, "one-too-many"}, 0, []byte("x"))
	if !errors.Is(err, ErrTooManyStreams) || !strings.Contains(err.Error(), "one-too-many") {
		t.Fatalf("stream %d: %v, want ErrTooManyStreams naming it", DefaultMaxStreams+1, err)
	}
	// Existing streams still take more.
	if _, err := b.Append(Key{"m", 1, "s0"}, 1, []byte("y")); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Append(Key{"m", 1, "s1"}, 1, make([]byte, 32<<20)); !errors.Is(err, ErrChunkTooLarge) {
		t.Fatalf("32 MiB chunk: %v, want ErrChunkTooLarge", err)
	}
}

// TestFollowWaitsForAnAttemptAboutToBegin: with pending true, following a
// log whose attempt has not begun waits for it instead of failing.
func TestFollowWaitsForAnAttemptAboutToBegin(t *testing.T) {
	b, _ := newBook(t)
	k := Key{MessageID: "m", Attempt: 1, Stream: "routine"}
	if err := b.FollowPending(context.Background(), k, 0, func() bool { return false }, func(uint64, []byte) error { return nil }); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("nothing pending: %v, want ErrNotExist", err)
	}
	got := make(chan string, 1)
	go func() {
		var out bytes.Buffer
		err := b.FollowPending(context.Background(), k, 0, func() bool { return true }, func(_ uint64, d []byte) error { out.Write(d); return nil })
		got <- fmt.Sprint(out.String(), err)
	}()
	select {
	case s := <-got:
		t.Fatalf("follow returned before the attempt began: %s", s)
	case <-time.After(100 * time.Millisecond):
	}
	b.Begin("m", 1)
	b.Append(k, 0, []byte("hello\n"))
	b.End("m", 1)
	select {
	case s := <-got:
		if s != "hello\n<nil>" {
			t.Errorf("follower got %q", s)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the follower did not finish")
	}
}

// TestLiveLogIsCutInTheBackground: a routine printing 40 times the limit
// never makes the live file pass six times the limit plus a chunk (the
// background cut, and an Append waiting for it, keep it there), offsets
// keep counting, and the ended log is the notice plus exactly its tail.
func TestLiveLogIsCutInTheBackground(t *testing.T) {
	const max = 256
	b, dir, k, p := liveLimited(t, max)
	var all strings.Builder
	appendLines(t, b, k, p, &all, 100, 6*max+100+200)
	b.End("m", 1)
	b.Wait()
	got, _ := os.ReadFile(p)
	total := all.Len()
	want := string(noticeLine(uint64(total-max), max)) + all.String()[total-max:]
	if string(got) != want {
		t.Fatalf("ended log:\n%q\nwant\n%q", got, want)
	}
	// A cut still copying when the attempt ended drops its file.
	deadline := time.Now().Add(10 * time.Second)
	for {
		leftovers, _ := filepath.Glob(filepath.Join(dir, ".decree-log.tmp-*"))
		if len(leftovers) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("temporary files left: %v", leftovers)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// appendLines appends n test lines to k, checking the stored count after
// each and that the file at p stays within bound bytes.
func appendLines(t *testing.T, b *Book, k Key, p string, all *strings.Builder, n int, bound int64) {
	t.Helper()
	for i := 0; i < n; i++ {
		stored, err := b.Append(k, uint64(all.Len()), []byte(line(i)))
		all.WriteString(line(i))
		if err != nil || stored != uint64(all.Len()) {
			t.Fatalf("append %d: stored %d, %v; want %d", i, stored, err, all.Len())
		}
		if fi, err := os.Stat(p); err == nil && fi.Size() > bound {
			t.Fatalf("live log grew to %d bytes, more than %d", fi.Size(), bound)
		}
	}
}

// liveLimited is a book limited to max bytes per log with attempt 1 of
// "m" under way, its routine stream's key and file.
func liveLimited(t *testing.T, max uint64) (*Book, string, Key, string) {
	b, dir := limitedBook(t, max)
	b.Begin("m", 1)
	return b, dir, Key{MessageID: "m", Attempt: 1, Stream: "routine"}, filepath.Join(dir, "m.1.routine.log")
}

// TestLogEndedInTheBackground: End hands a log over the limit to a
// background cut. Meanwhile its logical size is what it was, and an
// append (a note written after the attempt) waits for the cut and lands
// after the kept tail; WaitAttempt returns once the log is the notice,
// the tail and the note.
func TestLogEndedInTheBackground(t *testing.T) {
	const max = 256
	b, _, k, p := liveLimited(t, max)
	var all strings.Builder
	appendLines(t, b, k, p, &all, 10, 6*max+200)
	b.End("m", 1)
	size, err := b.Size(k)
	if err != nil || size != 1000 {
		t.Fatalf("size while the log is ended: %d, %v; want 1000", size, err)
	}
	note := "usage: 12 tokens\n"
	if n, err := b.Append(k, size, []byte(note)); err != nil || n != 1000+uint64(len(note)) {
		t.Fatalf("append after End: %d, %v", n, err)
	}
	b.WaitAttempt("m", 1)
	got, _ := os.ReadFile(p)
	// The note's append closed the log again: the limit keeps its last
	// 256 bytes, the note included.
	total := all.String() + note
	want := string(noticeLine(uint64(len(total)-max), max)) + total[len(total)-max:]
	if string(got) != want {
		t.Fatalf("log:\n%q\nwant\n%q", got, want)
	}
	b.Wait() // nothing left: returns at once
}
