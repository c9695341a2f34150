package events

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/decreehq/decree/internal/testtool"
)

// TestAppendOnAFullDisk: on a really full file system an event is still
// numbered and handed to live watchers (a warning that the disk is full
// must reach people), Append says it was not persisted, and the file keeps
// only whole lines.
func TestAppendOnAFullDisk(t *testing.T) {
	dir := testtool.MountTmpfs(t, "256k")
	path := filepath.Join(dir, FileName)
	l, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if _, err := l.Append(ev("before")); err != nil {
		t.Fatal(err)
	}
	w := l.Watch(WatchOptions{From: l.Last() + 1, Follow: true})
	defer w.Close()
	// Fill the disk, leaving less than one event line.
	fill, err := os.Create(filepath.Join(dir, "fill"))
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := fill.Write(make([]byte, 4096)); err != nil {
			break
		}
	}
	for {
		if _, err := fill.Write(make([]byte, 16)); err != nil {
			break
		}
	}
	fill.Close()
	e, err := l.Append(ev(strings.Repeat("the disk is full ", 600)))
	if !errors.Is(err, ErrNotPersisted) {
		t.Fatalf("Append on a full disk: %v, want ErrNotPersisted", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	got, err := w.Next(ctx)
	if err != nil || got.Sequence != e.Sequence || !strings.HasPrefix(got.Text, "the disk is full") {
		t.Fatalf("watcher got %v, %v; want the unpersisted event", got, err)
	}
	b, _ := os.ReadFile(path)
	if !bytes.HasSuffix(b, []byte("\n")) || bytes.Count(b, []byte("\n")) != 1 {
		t.Errorf("event log holds a partial line: %q", b)
	}
}
