package logbook

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func newBook(t testing.TB) (*Book, string) {
	dir := t.TempDir()
	b := New(func(k Key) (string, error) {
		return filepath.Join(dir, fmt.Sprintf("%s.%d.%s.log", k.MessageID, k.Attempt, k.Stream)), nil
	})
	t.Cleanup(b.Wait)
	return b, dir
}

func TestAppendIdempotentByOffset(t *testing.T) {
	k := Key{MessageID: "m", Attempt: 1, Stream: "routine"}
	steps := []struct {
		off        uint64
		data       string
		wantStored uint64
		wantGap    bool
	}{
		{0, "abc", 3, false},
		{3, "def", 6, false},
		{0, "abcdef", 6, false}, // full resend
		{2, "cdefgh", 8, false}, // overlap, then new bytes
		{8, "", 8, false},       // empty chunk
		{10, "zz", 8, true},     // gap
		{8, "ij", 10, false},
	}
	b, dir := newBook(t)
	b.Begin("m", 1)
	for i, s := range steps {
		stored, err := b.Append(k, s.off, []byte(s.data))
		var gap *GapError
		if errors.As(err, &gap) != s.wantGap || (err != nil && !s.wantGap) {
			t.Fatalf("step %d: err %v", i, err)
		}
		if s.wantGap && gap.Stored != 8 {
			t.Errorf("step %d: gap says stored %d", i, gap.Stored)
		}
		if stored != s.wantStored {
			t.Errorf("step %d: stored %d, want %d", i, stored, s.wantStored)
		}
	}
	b.End("m", 1)
	got, _ := os.ReadFile(filepath.Join(dir, "m.1.routine.log"))
	if string(got) != "abcdefghij" {
		t.Fatalf("log %q", got)
	}
	// A new book (a restarted controller) learns the stored size from disk.
	b2 := New(b.pathFor)
	if n, err := b2.Append(k, 5, []byte("fghijk")); err != nil || n != 11 {
		t.Fatalf("after restart: %d %v", n, err)
	}
	got, _ = os.ReadFile(filepath.Join(dir, "m.1.routine.log"))
	if string(got) != "abcdefghijk" {
		t.Fatalf("log after restart %q", got)
	}
}

func TestFollowFromOffsetUntilEnd(t *testing.T) {
	b, _ := newBook(t)
	k := Key{MessageID: "m", Attempt: 2, Stream: "routine"}
	// Neither live nor on disk: not found.
	if err := b.Follow(context.Background(), k, 0, func(uint64, []byte) error { return nil }); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("follow of a missing log: %v", err)
	}
	b.Begin("m", 2)
	b.Append(k, 0, []byte("0123456789"))
	type piece struct {
		off  uint64
		data string
	}
	got := make(chan piece, 100)
	done := make(chan error, 1)
	go func() {
		done <- b.Follow(context.Background(), k, 4, func(off uint64, d []byte) error {
			got <- piece{off, string(d)}
			return nil
		})
	}()
	if p := <-got; p.off != 4 || p.data != "456789" {
		t.Fatalf("first piece %+v", p)
	}
	b.Append(k, 10, []byte("ab"))
	if p := <-got; p.off != 10 || p.data != "ab" {
		t.Fatalf("live piece %+v", p)
	}
	b.End("m", 2)
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("follow did not end with the attempt")
	}
	// Following a finished log reads it to the end and returns.
	var all []byte
	if err := b.Follow(context.Background(), k, 0, func(_ uint64, d []byte) error { all = append(all, d...); return nil }); err != nil || string(all) != "0123456789ab" {
		t.Fatalf("finished follow %q %v", all, err)
	}
}

// BenchmarkAppend compares storing a log through the book (offset checks,
// follower notification) with plain appends to a file, chunk for chunk.
func BenchmarkAppend(b *testing.B) {
	chunk := make([]byte, 32<<10)
	b.Run("book", func(b *testing.B) {
		book, _ := newBook(b)
		book.Begin("m", 1)
		k := Key{MessageID: "m", Attempt: 1, Stream: "routine"}
		b.SetBytes(int64(len(chunk)))
		b.ReportAllocs()
		var off uint64
		for b.Loop() {
			n, err := book.Append(k, off, chunk)
			if err != nil {
				b.Fatal(err)
			}
			off = n
		}
		book.End("m", 1)
	})
	b.Run("plain-file", func(b *testing.B) {
		f, err := os.OpenFile(filepath.Join(b.TempDir(), "x.log"), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		b.SetBytes(int64(len(chunk)))
		b.ReportAllocs()
		for b.Loop() {
			if _, err := f.Write(chunk); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkCapped200MB stores 200 MB in 32 KiB chunks, as a routine
// printing 200 MB would, through a book with the default 64 MiB tail cap,
// through one without a cap, and as plain appends to a file (the floor).
func BenchmarkCapped200MB(b *testing.B) {
	chunk := make([]byte, 32<<10)
	for i := range chunk {
		chunk[i] = byte('a' + i%26)
	}
	const total = 200 << 20
	for _, c := range []struct {
		name string
		max  uint64
	}{{"cap-64MiB", 64 << 20}, {"no-cap", 0}} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(total)
			for b.Loop() {
				dir := b.TempDir()
				book := NewWithOptions(func(k Key) (string, error) { return filepath.Join(dir, k.Stream+".log"), nil },
					Options{MaxBytes: func() uint64 { return c.max }})
				storeAll(b, book, chunk, total)
			}
		})
	}
	b.Run("plain-file", func(b *testing.B) {
		b.SetBytes(total)
		for b.Loop() {
			writePlain(b, chunk, total/len(chunk))
		}
	})
}

// writePlain appends chunk n times to a new file and syncs it.
func writePlain(b *testing.B, chunk []byte, n int) {
	f, err := os.OpenFile(filepath.Join(b.TempDir(), "x.log"), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	for i := 0; i < n; i++ {
		if _, err := f.Write(chunk); err != nil {
			b.Fatal(err)
		}
	}
	f.Sync()
}

// storeAll stores total bytes, chunk after chunk, as one attempt's log.
func storeAll(b *testing.B, book *Book, chunk []byte, total uint64) {
	book.Begin("m", 1)
	defer book.End("m", 1)
	k := Key{MessageID: "m", Attempt: 1, Stream: "routine"}
	for off := uint64(0); off < total; {
		n, err := book.Append(k, off, chunk)
		if err != nil {
			b.Fatal(err)
		}
		off = n
	}
}

// A follower reading a long log gets it in chunks that grow past 64 KiB up
// to ReadChunk (fewer, larger WatchLogs messages), every byte once, in
// order, at the offsets it was stored at, whether it follows a live log or
// reads an ended one.
func TestFollowerChunksGrowToReadChunk(t *testing.T) {
	k := Key{MessageID: "m", Attempt: 1, Stream: "routine"}
	want := make([]byte, 5<<20)
	for i := range want {
		want[i] = byte(i*7 + i/4096)
	}
	for _, live := range []bool{true, false} {
		t.Run(fmt.Sprintf("live=%v", live), func(t *testing.T) {
			b, _ := newBook(t)
			b.Begin("m", 1)
			if !live {
				for off := 0; off < len(want); off += 32 << 10 {
					if _, err := b.Append(k, uint64(off), want[off:off+32<<10]); err != nil {
						t.Fatal(err)
					}
				}
				b.End("m", 1)
			}
			var got []byte
			largest := 0
			done := make(chan error, 1)
			go func() {
				done <- b.Follow(context.Background(), k, 0, func(off uint64, d []byte) error {
					if off != uint64(len(got)) {
						return fmt.Errorf("chunk at offset %d after %d bytes", off, len(got))
					}
					got = append(got, d...)
					largest = max(largest, len(d))
					return nil
				})
			}()
			if live {
				for off := 0; off < len(want); off += 512 << 10 {
					if _, err := b.Append(k, uint64(off), want[off:off+512<<10]); err != nil {
						t.Fatal(err)
					}
				}
				b.End("m", 1)
			}
			select {
			case err := <-done:
				if err != nil {
					t.Fatal(err)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("follower did not finish")
			}
			if string(got) != string(want) {
				t.Fatalf("follower got %d bytes that differ from the %d stored", len(got), len(want))
			}
			if largest <= 64<<10 || largest > ReadChunk {
				t.Fatalf("largest chunk %d bytes; want over 64 KiB and at most %d", largest, ReadChunk)
			}
		})
	}
}
