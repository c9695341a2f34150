package store

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/decreehq/decree/pkg/layout"
	"github.com/decreehq/decree/pkg/message"
)

// startRuns starts n runs of one chain; the first finished ones finish.
func startRuns(t *testing.T, s *Store, n, finished int) []string {
	t.Helper()
	var ids []string
	for i := 0; i < n; i++ {
		m := &message.Message{HasFrontmatter: true, Body: []byte("x\n")}
		m.Set("chain", "2026010100000000")
		m.Set("seq", i)
		e, err := s.CreateMessage(fmt.Sprintf("m%d", i), m)
		if err != nil {
			t.Fatal(err)
		}
		run, err := s.StartRun(RunStart{Entry: e, Routine: "develop", MaxAttempts: 1})
		if err != nil {
			t.Fatal(err)
		}
		if err := run.Commit(); err != nil {
			t.Fatal(err)
		}
		if i < finished {
			if _, err := run.Finish(OutcomeSucceeded); err != nil {
				t.Fatal(err)
			}
		}
		ids = append(ids, e.ID)
	}
	return ids
}

func registry(t *testing.T, root string) []string {
	t.Helper()
	ents, err := os.ReadDir(filepath.Join(root, layout.Dir, layout.OpenRuns))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}

// A started run is registered until it finishes, and a store opened later
// finds the open runs from the registry alone: the finished runs' state is
// never read (here it is made unreadable, which a full scan would count
// as open).
func TestOpenRunRegistry(t *testing.T) {
	root := t.TempDir()
	s := openStore(t, root)
	ids := startRuns(t, s, 6, 4)
	if got, want := registry(t, root), ids[4:]; !slices.Equal(got, want) {
		t.Fatalf("registry = %v, want %v", got, want)
	}
	s.Close()
	for _, id := range ids[:4] {
		if err := os.WriteFile(filepath.Join(root, layout.Dir, layout.Runs, id, layout.StateFile), []byte("{not json"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	s2 := openStore(t, root)
	defer s2.Close()
	got := s2.UnfinishedRuns()
	slices.Sort(got)
	if !slices.Equal(got, ids[4:]) {
		t.Errorf("unfinished runs = %v, want %v", got, ids[4:])
	}
}

// The registry may name more than the open runs (a crash between a
// run's outcome and the removal of its file, a run directory removed by
// hand): readers drop those names.
func TestOpenRunRegistryDropsStaleNames(t *testing.T) {
	root := t.TempDir()
	s := openStore(t, root)
	ids := startRuns(t, s, 3, 2)
	s.Close()
	reg := filepath.Join(root, layout.Dir, layout.OpenRuns)
	for _, name := range []string{ids[0], "2026010100000000-99"} { // finished; no run directory
		if err := os.WriteFile(filepath.Join(reg, name), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	s2 := openStore(t, root)
	defer s2.Close()
	if got := s2.UnfinishedRuns(); !slices.Equal(got, ids[2:]) {
		t.Errorf("unfinished runs = %v, want %v", got, ids[2:])
	}
	if got := registry(t, root); !slices.Equal(got, ids[2:]) {
		t.Errorf("registry after the scan = %v, want %v", got, ids[2:])
	}
}

// A project made before the registry existed is scanned in full once and
// the registry built from what the scan finds; a run started then is
// registered as usual.
func TestOpenRunRegistryBuiltForOldProjects(t *testing.T) {
	root := t.TempDir()
	s := openStore(t, root)
	ids := startRuns(t, s, 5, 3)
	s.Close()
	if err := os.RemoveAll(filepath.Join(root, layout.Dir, layout.OpenRuns)); err != nil {
		t.Fatal(err)
	}
	// An interrupted build left its temporary copy.
	if err := os.Mkdir(filepath.Join(root, layout.Dir, "."+layout.OpenRuns+".tmp-x1"), 0o755); err != nil {
		t.Fatal(err)
	}
	s2 := openStore(t, root)
	defer s2.Close()
	if got := registry(t, root); !slices.Equal(got, ids[3:]) {
		t.Fatalf("rebuilt registry = %v, want %v", got, ids[3:])
	}
	if _, err := os.Stat(filepath.Join(root, layout.Dir, "."+layout.OpenRuns+".tmp-x1")); !os.IsNotExist(err) {
		t.Errorf("the interrupted build's copy is still there (%v)", err)
	}
	got := s2.UnfinishedRuns()
	slices.Sort(got)
	if !slices.Equal(got, ids[3:]) {
		t.Errorf("unfinished runs = %v, want %v", got, ids[3:])
	}
}

// With SetLogsEnded, a finished run stays in the registry until its logs
// are ended, so a start after a kill meanwhile still sweeps its directory
// (a temporary file of the log's cut is removed); Close waits for the
// removal.
func TestFinishedRunLeavesRegistryAfterItsLogs(t *testing.T) {
	root := t.TempDir()
	s := openStore(t, root)
	release := make(chan struct{})
	waited := make(chan string, 4)
	s.SetLogsEnded(func(id string) { waited <- id; <-release })
	ids := startRuns(t, s, 2, 1)
	select {
	case got := <-waited:
		if got != ids[0] {
			t.Fatalf("waited for the logs of %s, want %s", got, ids[0])
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Finish did not wait for the run's logs")
	}
	if got := registry(t, root); !slices.Equal(got, ids) {
		t.Fatalf("registry while the logs are ended = %v, want %v (the finished run still named)", got, ids)
	}
	// A kill now leaves the cut's temporary file; the next start removes it.
	tmp := filepath.Join(root, layout.Dir, layout.Runs, ids[0], ".decree-log.tmp-123")
	if err := os.WriteFile(tmp, []byte("tail"), 0o644); err != nil {
		t.Fatal(err)
	}
	s2 := openStore(t, root)
	if _, err := os.Stat(tmp); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the cut's temporary file survived the next start: %v", err)
	}
	if got := s2.UnfinishedRuns(); !slices.Equal(got, ids[1:]) {
		t.Errorf("unfinished runs = %v, want %v", got, ids[1:])
	}
	s2.Close()
	closed := make(chan struct{})
	go func() { s.Close(); close(closed) }()
	select {
	case <-closed:
		t.Fatal("Close returned while a finished run's logs were still being ended")
	case <-time.After(50 * time.Millisecond):
	}
	close(release)
	<-closed
	if got := registry(t, root); !slices.Equal(got, ids[1:]) {
		t.Errorf("registry after the logs ended = %v, want %v", got, ids[1:])
	}
}
